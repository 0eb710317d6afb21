"""``python -m siamese ...``: the CLI, as torchrun starts it (``torchrun ... -m siamese train ...``)."""

from .cli import main

if __name__ == "__main__":
    main()

"""Reading and writing folders and files safely: atomic writes, manifests, weights, optional
extras, progress output.

- :mod:`.atomic`: a folder or file appears whole or not at all; nothing not ours is deleted
- :mod:`.manifest`: a folder's JSON manifest, checked field by field; what a model folder's format is
- :mod:`.weights`: safetensors weights checked (shapes, finite values) before anything is allocated
- :mod:`.extras`: an optional package missing → one line naming its ``pip install``
- :mod:`.progress`: progress bars and log lines on stderr"""

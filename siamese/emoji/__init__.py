"""Emojis as Siamese answers: a convolutional VAE over emoji images and a text→emoji model.

- :mod:`.images`: the 36×36 RGBA emoji images, names (code points) ↔ characters.
- :mod:`.vae`, :mod:`.vae_train`: the convolutional VAE, its 16-d codes, training.
- :mod:`.sheets`, :mod:`.generate`: decoded samples, 2-D grids, reconstructions and
  interpolations as PNG sheets.
- :mod:`.tweets`, :mod:`.sentiment`, :mod:`.text_model`, :mod:`.text_model_train`, :mod:`.text_model_eval`,
  :mod:`.suggest`: the question→emoji Siamese model trained on airline tweets, its report,
  and emoji suggestions for any text.
- :mod:`.folder`: saving and loading an emoji model folder.
- :mod:`.files`: what each ``siamese emoji …`` command runs, from files to folders (siamese/cli/emoji.py prints it).
"""

"""Teachers for distillation (``TrainConfig(teacher=...)`` with ``ModelConfig(loss="distill")``):
loading one (:func:`load_teacher`), its vectors of the training texts (:class:`TeacherVectors`),
and all-mpnet-base-v2 assembled offline from its PyPI parts (:func:`mpnet_path`)."""

from .mpnet import mpnet_path
from .teacher import NAMED, TeacherVectors, load_teacher, sentence_transformers_pooling

__all__ = ["NAMED", "TeacherVectors", "load_teacher", "mpnet_path", "sentence_transformers_pooling"]

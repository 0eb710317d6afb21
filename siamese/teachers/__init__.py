"""Teachers for distillation (``TrainConfig(teacher=...)`` with ``ModelConfig(loss="distill")``):
loading one (:func:`load_teacher`) and its vectors of the training texts (:class:`TeacherVectors`).
Named teachers ("mpnet") come from :mod:`siamese.pretrained`."""

from .teacher import TeacherVectors, load_teacher

__all__ = ["TeacherVectors", "load_teacher"]

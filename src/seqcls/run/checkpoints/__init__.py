"""A run's checkpoints: which are saved and how, and which one a run resumes from.

``saving`` keeps ``last.ckpt`` beside the best checkpoint; ``atomic_io`` writes each file whole
(locally or to a bucket), and ``reuse`` lets ``last.ckpt`` share the best one's file where the
state is the same; ``zero`` reads DeepSpeed ZeRO checkpoint folders; ``resume`` picks the
checkpoint a run starts from, and ``random_state`` carries torch's generators across it.
"""

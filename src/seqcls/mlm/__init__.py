"""``seqcls mlm``: continued masked-LM pretraining on unlabelled text.

``corpus`` is the data module (documents joined and cut into ``blocks``), ``model`` the
LightningModule, ``cli`` the sibling command. It reuses ``data/`` for reading and caching,
``model/`` for loading and optimising, and ``run/`` for the run directory.
"""

"""The DeepSpeed lane (``bash scripts/test.sh --deepspeed``): see lane.py."""

import os

# Read when deepspeed is first imported: without it DeepSpeed looks for CUDA.
os.environ.setdefault("DS_ACCELERATOR", "cpu")

#!/bin/sh
# Retrain both shipped models exactly as they were produced (run from the repo root).
# Needs a fast BLAS: Debian's python3-torch links libblas.so.3, which is the slow
# reference BLAS unless an optimized one (libopenblas0-pthread) is installed or
# put first on LD_LIBRARY_PATH (see tools/train/README.md).
set -e
export OPENBLAS_NUM_THREADS=1
COMMON="--batch 8 --seq 256 --warmup 100 --eval-stories 500"
# tiny: 1800 steps (cosine 3e-3 -> 3e-4), then continued to 2300 steps with the
# schedule stretched and a lower floor (3e-5); the LR is continuous at the joint.
/usr/bin/python3 tools/train/train.py --preset tiny --out data/models/tiny $COMMON \
    --steps 1800 --eval-every 300 "$@"
/usr/bin/python3 tools/train/train.py --preset tiny --out data/models/tiny $COMMON \
    --steps 2300 --min-lr 3e-5 --eval-every 250 --resume "$@"
# tiny-draft: same corpus, same tokenizer file.
/usr/bin/python3 tools/train/train.py --preset draft --out data/models/tiny-draft $COMMON \
    --tokenizer data/models/tiny/tokenizer.json --steps 1500 --eval-every 300 "$@"
/usr/bin/python3 tools/train/model_card.py data/models/tiny data/models/tiny-draft
/usr/bin/python3 tools/train/check_export.py data/models/tiny data/models/tiny-draft

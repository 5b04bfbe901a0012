"""The data files of the soul graph's static embedding model (soulgraph/engine/embeddings.py
reads them): vocab.txt, table.npy, scales.npy, model.json. See NOTICE for where they come from."""

from pathlib import Path

MODEL_DIR = Path(__file__).parent

"""In a real notebook kernel (nbclient): progress bars are widgets and TensorDicts show as HTML."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("ipywidgets")

ROOT = Path(__file__).resolve().parent.parent
WIDGET = "application/vnd.jupyter.widget-view+json"

CELLS = [
    f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
    "import tempfile, torch, tensordict\n"
    "from tensordict import TensorDict\n"
    "td = TensorDict({f'k{i}': torch.zeros(4, 2) for i in range(300)}, [4])\n"
    "print(tensordict.__file__)",
    "folder = tempfile.mkdtemp() + '/ckpt'\n_ = td.memmap(folder, pbar=True)",
    "_ = TensorDict.load_memmap(folder, pbar=True)",
    "_ = td.map(lambda x: x + 1, num_workers=2, chunksize=1, pbar=True)",
    "_ = td.consolidate(pbar=True)",
    "td",
]


def _run() -> Any:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3")
    with warnings.catch_warnings():  # jupyter_client's own deprecations are not ours
        warnings.simplefilter("ignore")
        client.execute()
    return nb


def test_notebook_bars_are_widgets_and_display_is_capped_html() -> None:
    nb = _run()
    first, saved, loaded, mapped, packed, shown = (cell.outputs for cell in nb.cells)
    assert first[0]["text"].strip() == str(ROOT / "tensordict" / "__init__.py")
    for outputs in (saved, loaded, mapped, packed):
        kinds = [out.get("data", {}) for out in outputs if out["output_type"] == "display_data"]
        assert any(WIDGET in data for data in kinds), outputs
    (result,) = shown
    html = result["data"]["text/html"]
    assert "... and 100 more" in html and html.count("<li>") == 201
    assert result["data"]["text/plain"].startswith("TensorDict(batch_size=[4], fields={")

"""A run's result is one object saved once (``RunResult.save``) and read back whole
(``RunResult.load``): scores, provenance and the per-item arrays the significance tests
need."""

from __future__ import annotations

import numpy as np

from disembed.encoders import HashEncoder
from disembed.experiment import RunSpec, Workspace, run
from disembed.experiment.run import RunOutputs
from disembed.results import ITEMS_FILE, RESULT_FILE, RunResult


def test_a_saved_run_loads_back_whole(full_data_dir, tmp_path):
    spec = RunSpec(method="baseline", encoder="hash:16", tasks=("sts17",))
    result = run(spec, Workspace(data_dir=str(full_data_dir), cache_dir=str(tmp_path / "c")),
                 outputs=RunOutputs(run_dir=tmp_path / "run"), encoder=HashEncoder(16))
    assert (tmp_path / "run" / RESULT_FILE).is_file() and (tmp_path / "run" / ITEMS_FILE).is_file()
    loaded = RunResult.load(tmp_path / "run")
    assert loaded.to_dict() == RunResult.from_json(tmp_path / "run" / RESULT_FILE).to_dict()
    (got,), (want,) = loaded.scores, result.scores
    assert got.per_item and got.per_item.keys() == want.per_item.keys()
    for key in want.per_item:
        np.testing.assert_array_equal(got.per_item[key], want.per_item[key])
    again = loaded.save(tmp_path / "copy")
    assert RunResult.load(again).to_json() == loaded.to_json()

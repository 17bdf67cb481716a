"""Every "data missing" error names the path it looked in and the command that fixes it."""

from __future__ import annotations

import re

import pytest

from disembed.evaluation import TASKS
from disembed.exceptions import ConfigError


@pytest.mark.parametrize(("task", "folder", "data_set"), [
    ("tatoeba", "", "tatoeba"),
    ("sts17", "sts17", "sts17"),
    ("wmt20-qe", "wmt20_mlqe/test", "wmt20-qe"),
])
def test_a_task_on_an_empty_data_folder_says_where_it_looked_and_how_to_fix(
        tmp_path, task, folder, data_set):
    with pytest.raises(ConfigError) as err:
        TASKS.get(task)(data_dir=str(tmp_path)).load_subsets()
    message = str(err.value)
    looked_in = (tmp_path / folder).resolve() if folder else tmp_path.resolve()
    assert f"looked in {looked_in}" in message
    assert f"'disembed data download {data_set}'" in message
    assert "--data-dir" in message and "present: []" not in message


def test_training_data_missing_names_the_folder_and_the_download(tmp_path):
    from disembed.data.training_set import build_training_set

    with pytest.raises(ConfigError, match=re.escape(f"looked in {tmp_path.resolve()}")) as err:
        build_training_set(["de"], 20, data_dir=tmp_path)
    assert "disembed data download parallel-" in str(err.value)

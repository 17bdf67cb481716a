"""The main job trains the default recipe with the settings tune chose, and says so."""

from disembed.experiment import DEFAULT_METHODS, DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS
from disembed.experiment.bench import BenchConfig
from disembed.methods import tuning_grid


def _params(config: BenchConfig) -> dict[str, dict]:
    return {spec.method: spec.params for spec, _ in config.specs()
            if spec.encoder != "hash:64"}


def test_default_job_trains_the_default_recipe_with_its_tuned_settings(tmp_path):
    config = BenchConfig(encoders=["hash:16"], languages=["de"], out_dir=str(tmp_path))
    assert DEFAULT_METHODS == ("baseline", "mean-centering", DEFAULT_RECIPE)
    params = _params(config)
    assert params[DEFAULT_RECIPE] == DEFAULT_RECIPE_PARAMS
    assert params["baseline"] == {} and params["mean-centering"] == {}
    (note,) = config.notes()
    assert note.startswith(f"{DEFAULT_RECIPE}: ") and "disembed tune" in note
    # a run may keep mean-centering on its own held-out pairs: the note calls nothing a winner
    assert "winner" not in note


def test_the_default_settings_are_candidates_of_the_tune_grid():
    """The default must be something tune can have chosen, not a hand-picked value; the
    safeguards of issue 46 (held-out check, epoch length) are the only settings beside."""
    from disembed.experiment.bench import DEFAULT_RECIPE_SAFEGUARDS, DEFAULT_RECIPE_TUNED

    grid = tuning_grid(DEFAULT_RECIPE)
    assert set(DEFAULT_RECIPE_TUNED) <= set(grid)
    assert all(value in grid[key] for key, value in DEFAULT_RECIPE_TUNED.items())
    assert DEFAULT_RECIPE_PARAMS == {**DEFAULT_RECIPE_TUNED, **DEFAULT_RECIPE_SAFEGUARDS}
    assert set(DEFAULT_RECIPE_SAFEGUARDS) == {"reference_check", "min_epoch_steps"}


def test_user_settings_go_over_the_defaults_and_drop_the_tuned_note(tmp_path):
    config = BenchConfig(encoders=["hash:16"], languages=["de"], out_dir=str(tmp_path),
                         method_params={DEFAULT_RECIPE: {"lr": 5e-4}})
    assert _params(config)[DEFAULT_RECIPE] == {**DEFAULT_RECIPE_PARAMS, "lr": 5e-4}
    (note,) = config.notes()
    assert "lr=0.0005" in note and "disembed tune" not in note


def test_other_recipes_keep_their_own_defaults(tmp_path):
    config = BenchConfig(encoders=["hash:16"], languages=["de"], out_dir=str(tmp_path),
                         methods=["seed", "lir"])
    assert _params(config) == {"seed": {}, "lir": {}} and config.notes() == []

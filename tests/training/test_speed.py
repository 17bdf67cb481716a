"""The training step's paths: eager float32 (deterministic), a compiled loss, bfloat16 head
products, and "auto" choosing among them only by measurement."""

import math

import numpy as np
import pytest
import torch

import disembed.training.speed as speed_module
import disembed.training.trainer as trainer_module
from disembed.exceptions import ConfigError
from disembed.methods import make_method
from disembed.training import StepRunner, TrainConfig
from disembed.training.batches import PairData, make_batch

B, D = 64, 16
#: an (emulated or native) bfloat16 head product keeps ~3 significant digits: the loss of a
#: batch moves by < 0.5% (measured <= 0.08%), the gradient keeps its direction (cosine
#: > 0.995; measured >= 0.998, ORACLE alone the lowest)
BF16_LOSS_RTOL = 5e-3
BF16_GRAD_MIN_COSINE = 0.995
RECIPES = [("seed", {}), ("dream", {}), ("meat", {}), ("oracle", {}),
           ("seed", {"oracle_variant": "official-old"})]


def recipe_and_batch(name, params, toy_pairs, seed=0):
    """A recipe with seeded heads (and MEAT's discriminator) and one fixed training batch."""
    src, tgt, src_lang = toy_pairs
    model = make_method(name, batch_size=B, **params)
    model.languages_ = ["de", "en", "zh"]
    model._prepare()
    model.head_ = model._new_head(D)
    model._new_adversary(D)
    s_ids = np.array([model.languages_.index(x) for x in src_lang])
    data = PairData.split(src, tgt, s_ids, np.full(len(src), 1), TrainConfig(seed=seed))
    batch = make_batch(data.src, data.tgt, data.s_lang, data.t_lang, data.train_idx[:B],
                       torch.Generator().manual_seed(seed), "mask")
    return model, batch


def loss_and_grads(model, batch, fn=None):
    params = list(model.head_.parameters())
    for p in params:
        p.grad = None
    loss, terms = (fn or (lambda b: model.loss(model.head_, b)))(batch)
    loss.backward()
    grads = [p.grad.clone() for p in params]
    return loss.detach(), {k: v.detach() for k, v in terms.items()}, grads


@pytest.mark.parametrize("name, params", RECIPES)
def test_compiled_capture_of_every_recipe_loss_equals_eager(name, params, toy_pairs):
    """What the compiled path traces (dynamo + AOT autograd, forward and backward) gives the
    eager loss, terms and gradients; inductor's fused kernels are checked in the slow test."""
    model, batch = recipe_and_batch(name, params, toy_pairs)
    eager = loss_and_grads(model, batch)
    traced = torch.compile(lambda b: model.loss(model.head_, b), backend="aot_eager",
                           dynamic=False)
    compiled = loss_and_grads(model, batch, traced)
    torch.testing.assert_close(compiled[0], eager[0], rtol=1e-6, atol=1e-6)
    assert compiled[1].keys() == eager[1].keys()
    for key in eager[1]:
        torch.testing.assert_close(compiled[1][key], eager[1][key], rtol=1e-6, atol=1e-6)
    for got, want in zip(compiled[2], eager[2], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("name, params", RECIPES)
def test_inductor_compiled_loss_and_gradients_equal_eager(name, params, toy_pairs):
    """The real fast path (inductor's generated C++ loops; ~15-25 s of compiling each, cold):
    fused reductions round differently, within float32 noise."""
    model, batch = recipe_and_batch(name, params, toy_pairs)
    eager = loss_and_grads(model, batch)
    compiled = loss_and_grads(model, batch, torch.compile(
        lambda b: model.loss(model.head_, b), dynamic=False))
    torch.testing.assert_close(compiled[0], eager[0], rtol=1e-5, atol=1e-6)
    for got, want in zip(compiled[2], eager[2], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name, params", RECIPES)
def test_bfloat16_head_products_stay_within_the_stated_tolerance(name, params, toy_pairs):
    """Emulated here (AVX2); the same rounding as native bfloat16 products to within their
    float32 accumulation. Only the head runs in bfloat16: the loss is float32."""
    model, batch = recipe_and_batch(name, params, toy_pairs)
    eager = loss_and_grads(model, batch)
    seen = {}
    hook = model.head_.register_forward_hook(
        lambda module, args, out: seen.update(dtype=out[0].dtype))  # returns None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = loss_and_grads(model, batch)
    hook.remove()
    assert seen["dtype"] == torch.bfloat16 and low[0].dtype == torch.float32
    assert low[0].item() == pytest.approx(eager[0].item(), rel=BF16_LOSS_RTOL)
    got = torch.cat([g.flatten() for g in low[2]])
    want = torch.cat([g.flatten() for g in eager[2]])
    assert torch.nn.functional.cosine_similarity(got, want, dim=0) > BF16_GRAD_MIN_COSINE
    assert not torch.equal(got, want)  # bfloat16 did run


class FakeClock:
    """Time moves only when a test step says how long it took."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def run_steps(runner, clock, n, eager_s, compiled_s):
    paths = []
    for _ in range(n):
        with runner.step(B) as fn:
            is_compiled = fn is runner.compiled_fn
            fn(None)
            clock.now += compiled_s if is_compiled else eager_s
        paths.append("compiled" if is_compiled else "eager")
    return paths


def fake_runner(clock, compiled, planned=math.inf, compile_s=5.0, **config):
    calls = []

    def compiler(fn):
        calls.append(fn)
        clock.now += compile_s
        return lambda batch: compiled.append(batch)

    config = TrainConfig(batch_size=B, deterministic=False, precision="float32", **config)
    runner = StepRunner(lambda batch: None, config, planned_steps=planned, clock=clock,
                        compiler=compiler)
    return runner, calls


@pytest.mark.parametrize("compiled_s, chosen", [(0.010, "compiled"), (0.0195, "eager"),
                                                (0.030, "eager")])
def test_auto_keeps_the_compiled_loss_only_when_measured_faster(compiled_s, chosen):
    clock, compiled = FakeClock(), []
    runner, calls = fake_runner(clock, compiled)
    paths = run_steps(runner, clock, 20, eager_s=0.020, compiled_s=compiled_s)
    n = speed_module.CALIBRATION_STEPS
    assert paths[: n + 1] == ["eager"] * (n + 1)  # one warm-up + n timed eager steps
    assert paths[n + 1 : 2 * n + 2] == ["compiled"] * (n + 1)  # compile + n timed steps
    assert set(paths[2 * n + 2 :]) == {chosen}
    assert len(calls) == 1
    record = runner.to_dict()
    assert record["speed"] == chosen and runner.label == f"{chosen}/float32"
    assert record["eager_step_seconds"] == pytest.approx(0.020)
    assert record["compiled_step_seconds"] == pytest.approx(compiled_s)
    assert record["compile_seconds"] == pytest.approx(5.0)
    assert f"speed='auto': {chosen}" in record["reason"]


def test_auto_does_not_compile_a_run_too_short_to_repay_it():
    clock, compiled = FakeClock(), []
    runner, calls = fake_runner(clock, compiled, planned=200)  # 200 x 20 ms: 4 s of steps
    paths = run_steps(runner, clock, 30, eager_s=0.020, compiled_s=0.001)
    assert set(paths) == {"eager"} and calls == [] and compiled == []
    assert "less than a compile" in runner.to_dict()["reason"]


def test_auto_counts_a_time_budget_as_the_most_a_compile_can_save():
    clock, compiled = FakeClock(), []
    runner, calls = fake_runner(clock, compiled, time_budget_seconds=10.0)
    run_steps(runner, clock, 30, eager_s=0.020, compiled_s=0.001)
    assert calls == [] and runner.to_dict()["speed"] == "eager"


def test_partial_batches_never_take_the_compiled_path():
    clock, compiled = FakeClock(), []
    runner, calls = fake_runner(clock, compiled, speed="compiled")
    with runner.step(B - 3) as fn:
        assert fn is runner.loss_fn
    with runner.step(B) as fn:
        assert fn is runner.compiled_fn
        fn("batch")
    assert compiled == ["batch"] and len(calls) == 1


def test_a_failing_compile_falls_back_in_auto_and_is_an_error_when_asked_for(caplog):
    def broken(fn):
        raise RuntimeError("no C++ compiler")

    config = TrainConfig(batch_size=B, deterministic=False, precision="float32",
                         speed="compiled")
    runner = StepRunner(lambda batch: "eager result", config, compiler=broken)
    with pytest.raises(ConfigError, match="C\\+\\+ compiler"), runner.step(B) as fn:
        fn(None)
    auto = StepRunner(lambda batch: "eager result", TrainConfig(
        batch_size=B, deterministic=False, precision="float32", speed="auto"), compiler=broken)
    auto.calibration.phase = "compiled"
    with caplog.at_level("WARNING", logger="disembed"), auto.step(B) as fn:
        assert fn(None) == "eager result"
    assert auto.to_dict()["speed"] == "eager" and "torch.compile failed" in auto.reason


def test_deterministic_forbids_the_paths_that_change_the_numerics():
    with pytest.raises(ConfigError, match="deterministic=False"):
        TrainConfig(speed="compiled")
    with pytest.raises(ConfigError, match="deterministic=False"):
        TrainConfig(precision="bfloat16")
    with pytest.raises(ConfigError, match="speed must be one of"):
        make_method("seed", speed="fast", deterministic=False)
    TrainConfig(speed="compiled", precision="bfloat16", deterministic=False)


@pytest.mark.parametrize("name", ["seed", "meat"])
def test_deterministic_runs_never_compile_nor_autocast_nor_probe(name, toy_pairs, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a deterministic run must not compile or probe")

    monkeypatch.setattr(speed_module, "_default_compiler", forbidden)
    monkeypatch.setattr(speed_module, "probe", forbidden)
    monkeypatch.setattr(torch, "compile", forbidden)
    src, tgt, src_lang = toy_pairs
    model = make_method(name, batch_size=64, max_epochs=2, speed="auto", precision="auto")
    autocast = []
    real_loss = model.loss

    def watched_loss(head, batch):
        autocast.append(torch.is_autocast_enabled("cpu"))
        return real_loss(head, batch)

    monkeypatch.setattr(model, "loss", watched_loss)
    model.fit(src, tgt, src_lang, "en")
    assert autocast and not any(autocast)
    path = model.history_.step_path
    assert (path["speed"], path["precision"]) == ("eager", "float32")
    assert path["requested"]["deterministic"] is True and "deterministic" in path["reason"]
    assert path["compile_seconds"] is None and path["eager_step_seconds"] is None
    assert path["fused_adam"] is False
    assert {e["path"] for e in model.history_.epochs} == {"eager/float32"}


def test_precision_auto_follows_the_probe(toy_pairs, monkeypatch):
    class Caps:
        bf16_faster = True

    monkeypatch.setattr(speed_module, "probe", lambda: Caps())
    src, tgt, src_lang = toy_pairs
    model = make_method("seed", batch_size=64, max_epochs=1, deterministic=False,
                        speed="eager")
    model.fit(src, tgt, src_lang, "en")
    assert model.history_.step_path["precision"] == "bfloat16"
    assert model.history_.step_path["bf16_faster"] is True
    assert model.history_.epochs[0]["path"] == "eager/bfloat16"
    Caps.bf16_faster = False
    model = make_method("seed", batch_size=64, max_epochs=1, deterministic=False,
                        speed="eager").fit(src, tgt, src_lang, "en")
    assert model.history_.epochs[0]["path"] == "eager/float32"


def test_a_compiled_run_trains_and_records_its_path(toy_pairs, monkeypatch):
    """The trainer wiring: compiled full-size steps (aot_eager here, fast to build), eager
    partial batches and validation; the history says what ran."""
    monkeypatch.setattr(speed_module, "_default_compiler",
                        lambda fn: torch.compile(fn, backend="aot_eager", dynamic=False))
    src, tgt, src_lang = toy_pairs
    params = dict(batch_size=64, max_epochs=2, patience=100)
    compiled = make_method("meat", deterministic=False, speed="compiled",
                           precision="float32", **params).fit(src, tgt, src_lang, "en")
    eager = make_method("meat", **params).fit(src, tgt, src_lang, "en")
    path = compiled.history_.step_path
    assert path["speed"] == "compiled" and path["compile_seconds"] > 0 and path["fused_adam"]
    assert [e["path"] for e in compiled.history_.epochs] == ["compiled/float32"] * 2
    for a, b in zip(compiled.history_.epochs, eager.history_.epochs, strict=True):
        assert a["val_loss"] == pytest.approx(b["val_loss"], rel=1e-5)


def test_a_fast_run_resumes_from_its_checkpoint(toy_pairs, tmp_path, monkeypatch):
    """Off the deterministic path too (fused Adam, bfloat16 products), a killed run resumes
    from its checkpoint, and eager steps make it the same run bit for bit."""

    class Stop(Exception):
        pass

    src, tgt, src_lang = toy_pairs
    params = dict(batch_size=64, max_epochs=4, patience=100, deterministic=False,
                  speed="eager", precision="bfloat16")
    straight = make_method("seed", **params).fit(src, tgt, src_lang, "en")
    real_save, calls = trainer_module.save_checkpoint, []

    def save_then_die(directory, state):
        real_save(directory, state)
        calls.append(1)
        if len(calls) == 2:
            raise Stop

    with monkeypatch.context() as m:
        m.setattr(trainer_module, "save_checkpoint", save_then_die)
        with pytest.raises(Stop):
            make_method("seed", **params).fit(src, tgt, src_lang, "en", checkpoint_dir=tmp_path)
    resumed = make_method("seed", **params).fit(src, tgt, src_lang, "en",
                                                checkpoint_dir=tmp_path)
    assert [e["path"] for e in resumed.history_.epochs] == ["eager/bfloat16"] * 4
    assert resumed.history_.step_path["fused_adam"] is True
    for key, value in straight.head_.state_dict().items():
        assert torch.equal(resumed.head_.state_dict()[key], value), key

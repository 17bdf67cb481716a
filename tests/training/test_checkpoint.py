"""Checkpoints: safetensors + JSON, no pickle, exact resume, tampering moved aside."""

import hashlib
import json
import pickle

import pytest
import torch
from safetensors.torch import load_file

import disembed.training.trainer as trainer_module
from disembed.methods import make_method
from disembed.training.checkpoint import (
    CHECKPOINT_NAME,
    Checkpoint,
    load_checkpoint,
    optimizer_from_checkpoint,
    optimizer_to_checkpoint,
    save_checkpoint,
)

TIMINGS = {"train_seconds", "val_seconds", "pairs_per_second"}


class Stop(Exception):
    pass


@pytest.fixture
def no_pickle(monkeypatch):
    """Any unpickling or torch.save/torch.load during the test fails it."""

    def forbidden(*args, **kwargs):
        raise AssertionError("pickle-based (de)serialisation must not be used")

    for owner, name in ((torch, "load"), (torch, "save"), (pickle, "load"), (pickle, "loads")):
        monkeypatch.setattr(owner, name, forbidden)


def die_after(monkeypatch, saves: int) -> None:
    """Make training raise ``Stop`` right after its ``saves``-th checkpoint."""
    real = trainer_module.save_checkpoint
    calls = {"n": 0}

    def save_then_maybe_die(directory, state):
        real(directory, state)
        calls["n"] += 1
        if calls["n"] == saves:
            raise Stop

    monkeypatch.setattr(trainer_module, "save_checkpoint", save_then_maybe_die)


def count_epochs(monkeypatch):
    """Count the epochs the trainer runs from now on; returns a function giving the count."""
    real = trainer_module.run_epoch
    calls = {"n": 0}

    def counted(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "run_epoch", counted)
    return lambda: calls["n"]


def history_without_timings(history) -> str:
    data = history.to_dict()
    data["epochs"] = [{k: v for k, v in e.items() if k not in TIMINGS} for e in data["epochs"]]
    data.pop("seconds")
    return json.dumps(data, sort_keys=True)


def fit(method, toy_pairs, params, **kwargs):
    src, tgt, src_lang = toy_pairs
    return make_method(method, **params).fit(src, tgt, src_lang, "en", **kwargs)


@pytest.mark.parametrize("method, params, kill_after", [
    ("seed", {"max_epochs": 6, "patience": 100}, 3),
    ("meat", {"max_epochs": 5, "patience": 100}, 2),
    ("seed", {"max_epochs": 5, "patience": 100, "negatives": "official"}, 2),
    # early stopping after the resume: best state and patience count must carry over
    ("dream", {"lr": 0.05, "patience": 2, "max_epochs": 60}, 2),
])
def test_resumed_run_is_bit_identical_to_an_uninterrupted_one(method, params, kill_after,
                                                              toy_pairs, tmp_path, monkeypatch,
                                                              no_pickle):
    params = {"batch_size": 64, **params}
    straight = fit(method, toy_pairs, params)
    with monkeypatch.context() as m:
        die_after(m, kill_after)
        with pytest.raises(Stop):
            fit(method, toy_pairs, params, checkpoint_dir=tmp_path)
    epochs_run = count_epochs(monkeypatch)
    resumed = fit(method, toy_pairs, params, checkpoint_dir=tmp_path)
    assert len(resumed.history_.epochs) > kill_after
    # the second call trained only the epochs after the interruption: a trainer that read
    # the checkpoint and then started afresh ends with the same bits (training is
    # deterministic) but runs every epoch again
    assert epochs_run() == len(straight.history_.epochs) - kill_after
    for module in ("head_", "discriminator_") if method == "meat" else ("head_",):
        ours, theirs = getattr(resumed, module).state_dict(), getattr(straight, module).state_dict()
        assert ours.keys() == theirs.keys()
        for key in ours:
            assert ours[key].numpy().tobytes() == theirs[key].numpy().tobytes(), (module, key)
    assert history_without_timings(resumed.history_) == history_without_timings(straight.history_)
    if method == "dream":
        assert straight.history_.stop_reason == "early_stopping"


def test_checkpoint_is_safetensors_plus_json_with_the_tensor_hash(toy_pairs, tmp_path, no_pickle):
    fit("meat", toy_pairs, {"max_epochs": 2, "batch_size": 64}, checkpoint_dir=tmp_path)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 2 and CHECKPOINT_NAME in files
    meta = json.loads((tmp_path / CHECKPOINT_NAME).read_text())
    tensor_file = tmp_path / meta["tensors"]
    assert tensor_file.suffix == ".safetensors" and tensor_file.name in files
    assert hashlib.sha256(tensor_file.read_bytes()).hexdigest() == meta["sha256"]
    tensors = load_file(str(tensor_file))
    prefixes = {k.split(".")[0] for k in tensors}
    assert prefixes == {"module", "best", "optimizer", "adversary", "adversary_optimizer"}
    assert meta["epoch"] == 2 and len(meta["history"]["epochs"]) == 2
    assert meta["optimizer"]["param_groups"][0]["lr"] == 1e-4


def test_an_orphan_tensor_file_is_ignored_then_removed(toy_pairs, tmp_path, monkeypatch):
    params = {"max_epochs": 3, "batch_size": 64, "patience": 100}
    with monkeypatch.context() as m:
        die_after(m, 1)
        with pytest.raises(Stop):
            fit("seed", toy_pairs, params, checkpoint_dir=tmp_path)
    # a crash between the tensor write and the JSON write leaves an orphan tensor file
    orphan = tmp_path / "checkpoint-0123456789abcdef.safetensors"
    orphan.write_bytes(b"half written")
    resumed = fit("seed", toy_pairs, params, checkpoint_dir=tmp_path)
    assert [e["epoch"] for e in resumed.history_.epochs] == [1, 2, 3]
    assert not orphan.exists() and not (tmp_path / "checkpoint.corrupt").exists()
    assert len(list(tmp_path.glob("checkpoint-*.safetensors"))) == 1


def tamper_tensors(directory):
    meta = json.loads((directory / CHECKPOINT_NAME).read_text())
    path = directory / meta["tensors"]
    blob = bytearray(path.read_bytes())
    blob[-1] ^= 0xFF  # one bit pattern in the last weight
    path.write_bytes(bytes(blob))
    return path


def tamper_json_value(directory):
    meta = json.loads((directory / CHECKPOINT_NAME).read_text())
    meta["epoch"] = 99  # the hash still matches; the history no longer does
    (directory / CHECKPOINT_NAME).write_text(json.dumps(meta))


def tamper_json_syntax(directory):
    (directory / CHECKPOINT_NAME).write_text("{not json")


@pytest.mark.parametrize("tamper", [tamper_tensors, tamper_json_value, tamper_json_syntax])
def test_tampered_checkpoint_is_moved_aside_and_training_starts_afresh(tamper, toy_pairs,
                                                                        tmp_path, caplog):
    params = {"max_epochs": 3, "batch_size": 64, "patience": 100}
    fresh = fit("seed", toy_pairs, params)
    fit("seed", toy_pairs, {**params, "max_epochs": 3}, checkpoint_dir=tmp_path)
    meta = json.loads((tmp_path / CHECKPOINT_NAME).read_text())
    tamper(tmp_path)
    with caplog.at_level("WARNING", logger="disembed"):
        again = fit("seed", toy_pairs, params, checkpoint_dir=tmp_path)
    assert (tmp_path / "checkpoint.corrupt").exists()
    if tamper is not tamper_json_syntax:
        assert (tmp_path / meta["tensors"]).with_suffix(".corrupt").exists()
    assert "starting afresh" in caplog.text
    assert [e["epoch"] for e in again.history_.epochs] == [1, 2, 3]
    for key, value in fresh.head_.state_dict().items():
        assert torch.equal(again.head_.state_dict()[key], value), key


def test_a_pickled_checkpoint_of_an_older_version_is_never_read(toy_pairs, tmp_path, no_pickle,
                                                                 caplog):
    (tmp_path / "checkpoint.pt").write_bytes(b"\x80\x04 pretend pickle")
    with caplog.at_level("WARNING", logger="disembed"):
        model = fit("seed", toy_pairs, {"max_epochs": 1, "batch_size": 64},
                    checkpoint_dir=tmp_path)
    assert len(model.history_.epochs) == 1
    assert (tmp_path / "checkpoint.pt.stale").exists() and not (tmp_path / "checkpoint.pt").exists()
    assert "not read" in caplog.text


def test_adam_state_round_trips_exactly():
    torch.manual_seed(0)
    module = torch.nn.Linear(5, 3)
    opt = torch.optim.Adam(module.parameters(), lr=3e-3, betas=(0.8, 0.95), weight_decay=0.1)
    for _ in range(3):
        opt.zero_grad()
        module(torch.randn(4, 5)).pow(2).sum().backward()
        opt.step()
    tensors, meta = optimizer_to_checkpoint("opt", opt)
    meta = json.loads(json.dumps(meta))  # what the JSON side turns it into
    restored = torch.optim.Adam(module.parameters(), lr=1.0)
    restored.load_state_dict(optimizer_from_checkpoint("opt", tensors, meta))
    a, b = opt.state_dict(), restored.state_dict()
    assert a["param_groups"] == b["param_groups"]
    assert b["param_groups"][0]["betas"] == (0.8, 0.95)
    for pid in a["state"]:
        for name, value in a["state"][pid].items():
            assert torch.equal(value, b["state"][pid][name]), (pid, name)


# --- a checkpoint the reader refuses, written by hand (no training) ----------------------
RUN = {"data": "toy", "seed": 0}
W = torch.arange(6.0).reshape(2, 3)


def saved(directory):
    """A valid checkpoint of run ``RUN`` in ``directory``; returns its JSON (a dict)."""
    save_checkpoint(directory, Checkpoint({"w": W}, {"fingerprint": RUN, "epoch": 1}))
    return json.loads((directory / CHECKPOINT_NAME).read_text())


def rewrite(directory, meta):
    (directory / CHECKPOINT_NAME).write_text(json.dumps(meta))


def not_an_object(directory, meta):
    rewrite(directory, [meta])
    return "expected a JSON object with format_version 1"


def other_format_version(directory, meta):
    rewrite(directory, {**meta, "format_version": 2})  # tensors and hash intact
    return "expected a JSON object with format_version 1"


def tensor_file_of_another_name(directory, meta):
    # an intact tensor file with the right hash, but not a checkpoint-<16 hex> name
    (directory / "weights.safetensors").write_bytes((directory / meta["tensors"]).read_bytes())
    rewrite(directory, {**meta, "tensors": "weights.safetensors"})
    return "tensor file name 'weights.safetensors' is not checkpoint-<16 hex>.safetensors"


def tensor_name_not_a_string(directory, meta):
    rewrite(directory, {**meta, "tensors": 7})
    return "tensor file name 7 is not checkpoint-<16 hex>.safetensors"


def other_hash(directory, meta):
    rewrite(directory, {**meta, "sha256": "0123456789abcdef" * 4})
    return (f"{meta['tensors']} has sha256 {meta['sha256'][:16]}..., the JSON expects "
            "0123456789abcdef...")


def not_safetensors(directory, meta):
    blob = b"not a safetensors file"
    name = "checkpoint-00000000000000ff.safetensors"
    (directory / name).write_bytes(blob)
    rewrite(directory, {**meta, "tensors": name, "sha256": hashlib.sha256(blob).hexdigest()})
    return f"{name} is not a readable safetensors file: "


@pytest.mark.parametrize("spoil", [not_an_object, other_format_version,
                                   tensor_file_of_another_name, tensor_name_not_a_string,
                                   other_hash, not_safetensors])
def test_a_checkpoint_the_reader_refuses_is_named_and_moved_aside(spoil, tmp_path, caplog):
    meta = saved(tmp_path)
    intact = load_checkpoint(tmp_path, RUN)
    assert intact.meta["epoch"] == 1 and torch.equal(intact.tensors["w"], W)
    why = spoil(tmp_path, meta)
    with caplog.at_level("WARNING", logger="disembed"):
        assert load_checkpoint(tmp_path, RUN) is None
    (message,) = [r.getMessage() for r in caplog.records]
    assert message.startswith(f"checkpoint {tmp_path / CHECKPOINT_NAME} is unreadable or "
                              f"corrupt ({why}")
    assert message.endswith("); starting afresh")
    assert (tmp_path / "checkpoint.corrupt").exists() and not (tmp_path / CHECKPOINT_NAME).exists()


def test_a_checkpoint_of_another_run_is_moved_aside_as_stale(tmp_path, caplog):
    meta = saved(tmp_path)
    with caplog.at_level("WARNING", logger="disembed"):
        assert load_checkpoint(tmp_path, {**RUN, "seed": 1}) is None
    (message,) = [r.getMessage() for r in caplog.records]
    assert message == (f"checkpoint {tmp_path / CHECKPOINT_NAME} belongs to another run (other "
                       f"data, settings or method); moved to {tmp_path / 'checkpoint.stale'}")
    assert (tmp_path / "checkpoint.stale").exists()
    assert (tmp_path / meta["tensors"]).with_suffix(".stale").exists()


def test_an_old_tensor_file_removed_meanwhile_by_another_process_is_no_error(tmp_path,
                                                                             monkeypatch):
    saved(tmp_path)
    first = next(tmp_path.glob("checkpoint-*.safetensors"))
    real_glob = type(tmp_path).glob

    def listed_then_removed(self, pattern):
        found = list(real_glob(self, pattern))
        if first in found:  # listed, then gone before the save removes it
            first.unlink()
        return found

    monkeypatch.setattr(type(tmp_path), "glob", listed_then_removed)
    save_checkpoint(tmp_path, Checkpoint({"w": W + 1}, {"fingerprint": RUN, "epoch": 2}))
    monkeypatch.undo()
    meta = load_checkpoint(tmp_path, RUN).meta
    assert meta["epoch"] == 2
    assert [p.name for p in tmp_path.glob("checkpoint-*.safetensors")] == [meta["tensors"]]


class DottedSlots(torch.optim.Optimizer):
    """SGD keeping per-parameter state of every kind a state_dict may hold: a Python int
    (not a tensor) for every parameter, a tensor under a dotted name for matrices only."""

    def __init__(self, params):
        super().__init__(params, {"lr": 0.1, "betas": (0.9, 0.99)})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["count"] = state.get("count", 0) + 1
                if p.dim() > 1:
                    state["avg.sq"] = state.get("avg.sq", torch.zeros_like(p)) + p.grad ** 2
                p -= group["lr"] * p.grad


def test_optimizer_state_round_trips_exactly_whatever_its_slots():
    torch.manual_seed(0)
    module = torch.nn.Linear(4, 2)
    opt = DottedSlots(module.parameters())
    for _ in range(2):
        opt.zero_grad()
        module(torch.randn(3, 4)).pow(2).sum().backward()
        opt.step()
    tensors, meta = optimizer_to_checkpoint("opt.head", opt)
    back = optimizer_from_checkpoint("opt.head", tensors, json.loads(json.dumps(meta)))
    want = opt.state_dict()
    assert back["param_groups"] == want["param_groups"]  # params a list, betas a tuple
    assert back["state"].keys() == want["state"].keys() == {0, 1}
    for pid, slots in want["state"].items():
        assert back["state"][pid].keys() == slots.keys()
        for name, value in slots.items():
            got = back["state"][pid][name]
            assert torch.equal(got, value) if torch.is_tensor(value) else got == value


def test_a_pickled_legacy_checkpoint_is_moved_aside_with_a_warning_naming_both_paths(
        tmp_path, caplog):
    """Issue 21.1 survivors: the warning's wording and both paths it names."""
    from disembed.training.checkpoint import LEGACY_NAME, _retire_legacy

    legacy = tmp_path / LEGACY_NAME
    legacy.write_bytes(b"not unpickled")
    with caplog.at_level("WARNING", logger="disembed.training.checkpoint"):
        _retire_legacy(tmp_path)
    aside = tmp_path / (LEGACY_NAME + ".stale")
    assert not legacy.exists() and aside.read_bytes() == b"not unpickled"
    assert [r.getMessage() for r in caplog.records] == [
        f"{legacy} is a pickled checkpoint of an older disembed; it is not read (no "
        f"unpickling) and was moved to {aside}"]

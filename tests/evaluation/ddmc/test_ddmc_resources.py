import pytest

from tokenized_bandit_gym.evaluation.ddmc import resources


def test_packaged_copy_is_preferred(tmp_path, monkeypatch):
    packaged, shared = tmp_path / "package" / "data", tmp_path / "shared" / "data"
    for root in (packaged, shared):
        (root / "models" / "stories260K").mkdir(parents=True)
        (root / "models" / "stories260K" / "config.json").write_text("{}")
    (shared / "truthfulqa").mkdir()
    (shared / "truthfulqa" / "TruthfulQA.csv").write_text("")
    monkeypatch.setattr(resources, "data_roots", lambda: [packaged, shared])
    assert resources.resolve_model("stories260K") == str(packaged / "models" / "stories260K")
    assert resources.resolve_dataset("truthfulqa") == shared / "truthfulqa" / "TruthfulQA.csv"
    monkeypatch.setattr(resources, "data_roots", lambda: [shared])
    assert resources.resolve_model("stories260K") == str(shared / "models" / "stories260K")


def test_missing_resources_raise(tmp_path, monkeypatch):
    monkeypatch.setattr(resources, "data_roots", lambda: [tmp_path])
    with pytest.raises(FileNotFoundError, match="stories260K"):
        resources.resolve_model("stories260K")
    with pytest.raises(FileNotFoundError, match="hh-rlhf"):
        resources.resolve_dataset("hh-rlhf")
    with pytest.raises(FileNotFoundError, match="not found"):
        resources.resolve_dataset(tmp_path / "nope.csv")

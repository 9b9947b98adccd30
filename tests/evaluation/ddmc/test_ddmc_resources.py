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
    assert resources.resolve_dataset("truthfulqa") == shared / "truthfulqa" / "TruthfulQA.csv"


def test_model_names_resolve_like_the_package_loader():
    from tokenized_bandit_gym.llm.load_language_model import DEFAULT_MODEL

    assert resources.resolve_model("stories260K") == DEFAULT_MODEL  # the packaged copy, as the envs load it
    assert resources.resolve_model("org/some-model") == "org/some-model"


def test_missing_resources_raise(tmp_path, monkeypatch):
    monkeypatch.setattr(resources, "data_roots", lambda: [tmp_path])
    with pytest.raises(FileNotFoundError, match="hh-rlhf"):
        resources.resolve_dataset("hh-rlhf")
    with pytest.raises(FileNotFoundError, match="not found"):
        resources.resolve_dataset(tmp_path / "nope.csv")

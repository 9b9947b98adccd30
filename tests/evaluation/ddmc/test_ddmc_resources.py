from pathlib import Path

import pytest

import tokenized_bandit_gym
from tokenized_bandit_gym.evaluation.ddmc import resources


def test_bundled_datasets_resolve_inside_the_package():
    package = Path(tokenized_bandit_gym.__file__).resolve().parent
    assert resources.data_roots() == [package / "data"]
    for name in resources.DATASET_FILES:
        path = resources.resolve_dataset(name)
        assert path.is_file() and path.is_relative_to(package)


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

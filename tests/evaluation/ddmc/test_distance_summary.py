import numpy as np
import pytest
from scipy import stats

from tokenized_bandit_gym.evaluation.ddmc.distance_summary import summarize_distances


def make_data(seed=0, n=400):
    rng = np.random.default_rng(seed)
    common = rng.integers(0, 6, size=n)
    items = rng.integers(0, 40, size=n)
    noise = rng.normal(size=(n, 2))
    distances = np.column_stack([5.0 - common + 0.5 * noise[:, 0], noise[:, 1] ** 2])
    return common, distances, items


def test_group_statistics_equal_a_plain_loop():
    common, distances, items = make_data()
    summaries = summarize_distances(common, distances, items, max_common=4, min_group_size=1, num_bootstrap=0)
    for column, summary in enumerate(summaries):
        np.testing.assert_array_equal(summary.common_suffix, [0, 1, 2, 3, 4])
        for i, c in enumerate(summary.common_suffix):
            values = distances[common == c, column]
            assert summary.count[i] == values.size
            assert summary.mean[i] == pytest.approx(values.mean())
            assert summary.std[i] == pytest.approx(values.std())
        keep = common <= 4
        expected = stats.spearmanr(common[keep], distances[keep, column]).statistic
        assert summary.spearman == pytest.approx(expected, abs=1e-12)


def test_decreasing_share_and_interval():
    common, distances, items = make_data()
    trend, flat = summarize_distances(common, distances, items, max_common=5, num_bootstrap=200, seed=3)
    assert trend.decreasing_share == 1.0
    assert trend.spearman_low <= trend.spearman <= trend.spearman_high < 0
    assert flat.spearman_low < 0 < flat.spearman_high  # no trend: the interval covers 0


def test_small_groups_and_gaps_are_left_out():
    common = np.array([0, 0, 0, 2, 2, 2, 3])
    distances = np.array([[3.0], [3.0], [3.0], [2.0], [2.0], [1.0], [9.0]])
    (summary,) = summarize_distances(common, distances, np.arange(7), min_group_size=2, num_bootstrap=0)
    np.testing.assert_array_equal(summary.common_suffix, [0, 2])
    assert np.isnan(summary.decreasing_share)  # 0 and 2 are not consecutive
    assert np.isnan(summary.spearman_low)


def test_bootstrap_is_seeded():
    common, distances, items = make_data(seed=1)
    a = summarize_distances(common, distances, items, num_bootstrap=50, seed=7)
    b = summarize_distances(common, distances, items, num_bootstrap=50, seed=7)
    assert [s.spearman_low for s in a] == [s.spearman_low for s in b]


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="common_suffix"):
        summarize_distances(np.zeros(3), np.zeros((4, 1)), np.zeros(3))
    with pytest.raises(ValueError, match="max_common"):
        summarize_distances(np.zeros(3), np.zeros((3, 1)), np.zeros(3), max_common=-1)


def test_a_report_reads_back_from_its_json_file(tmp_path):
    import json

    from tokenized_bandit_gym.evaluation.ddmc.ddmc_report import DDMCReport

    common, distances, items = make_data()
    trend, flat = summarize_distances(common, distances, items, max_common=5, num_bootstrap=0)
    report = DDMCReport(
        summaries={"all": {"d1": trend, "d2": flat}},
        num_items=40,
        num_pairs=400,
        num_prefix_pairs={"all": 400},
        settings={"model": "stories260K"},
    )
    path = tmp_path / "ddmc.json"
    report.save_json(path)  # NaN spearman intervals (no bootstrap) are written as null
    again = DDMCReport.from_dict(json.loads(path.read_text(encoding="utf-8")))
    assert again.settings == report.settings and again.num_prefix_pairs == report.num_prefix_pairs
    for name, summary in report.summaries["all"].items():
        back = again.summaries["all"][name]
        np.testing.assert_array_equal(back.common_suffix, summary.common_suffix)
        np.testing.assert_allclose(back.mean, summary.mean)
        assert np.isnan(back.spearman_low) == np.isnan(summary.spearman_low)


def test_a_packaged_model_in_the_cache_is_labelled_by_its_name(tmp_path):
    from tokenized_bandit_gym.evaluation.ddmc.ddmc_diagnostics import _model_label
    from tokenized_bandit_gym.llm.packaged_models import packaged_model

    model = packaged_model("smollm2-135m-instruct")
    converted = tmp_path / f"smollm2-135m-instruct-{model.gguf_sha256[:16]}"
    converted.mkdir()
    assert _model_label(str(converted)) == "smollm2-135m-instruct"  # not the cache folder's name
    other = tmp_path / "my-model-0123456789abcdef"
    other.mkdir()
    assert _model_label(str(other)) == "my-model-0123456789abcdef"
    assert _model_label("org/hub-model") == "org/hub-model"

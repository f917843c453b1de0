"""``reap collect --profile DIR``: traces in DIR, the timing table at the end."""

from __future__ import annotations

from traces import event_names, rollouts_in

from reap.cli import main


def test_collect_profile_writes_traces_and_prints_the_table(tmp_path, capsys):
    main(["collect", "--env", "CartPole-v1", "--frames", "100", "--frames-per-batch", "20",
          "--profile", str(tmp_path / "prof"), "--no-progress"])
    out = capsys.readouterr().out.splitlines()
    assert [p.name for p in (tmp_path / "prof").iterdir()] == ["worker_0.json"]
    names = event_names(tmp_path / "prof" / "worker_0.json")
    assert rollouts_in(names) == [1, 2] and names["reap::env_step"] == 40
    summary, header, row = out[-3:]
    assert summary.startswith("collected 100 frames")
    assert header.split()[:3] == ["worker", "frames", "frames/s"] and "env step" in header
    assert row.split()[:2] == ["0", "100"]

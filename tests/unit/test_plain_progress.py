"""Progress off a terminal (a log file, CI): plain lines at each stage and now and then."""

from itsmreview.cli.base import plain_progress


def test_a_line_at_each_stage_and_at_most_every_interval(capsys):
    now = [100.0]
    progress = plain_progress("importing", every=10, clock=lambda: now[0])
    progress("hashing", 0.05)
    for second, rows in ((1, 1000), (5, 5000), (12, 12000), (15, 15000), (23, 23000)):
        now[0] = 100.0 + second
        progress(f"reading: {rows:,} rows, 1,000 events/s", 0.05 + 0.35 * rows / 40000)
    now[0] = 140.0
    progress("materialising variants", 0.45)
    progress("storing", 1.0)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "importing: 5% hashing",
        # the first reading line at once, then one after 10 s, then 10 s after that; time
        # left = elapsed x (1 - done) / done: 1 x 0.94125 / 0.05875, 12 x 0.845 / 0.155, ...
        "importing: 5% reading: 1,000 rows, 1,000 events/s, about 16 s left",
        "importing: 15% reading: 12,000 rows, 1,000 events/s, about 65 s left",
        "importing: 25% reading: 23,000 rows, 1,000 events/s, about 69 s left",
        "importing: 45% materialising variants, about 49 s left",
        "importing: 100% storing",
    ]

"""The snippet's output directory, $KOTOBA_OUTPUT_DIR: made empty for each
run inside its scratch, writable by the snippet, gone with the run."""
import os

from conftest import wait_for

SHOW_DIR = ("import os\n"
            "d = os.environ['KOTOBA_OUTPUT_DIR']\n"
            "print(d)\n"
            "print(sorted(os.listdir(d)))\n"
            "print(os.path.dirname(d) == os.environ['TMPDIR'])\n")


WRITE = ("with open(os.path.join(d, 'a.png'), 'wb') as f:\n"
         "    f.write(b'x')\n")


def test_output_dir_is_empty_and_writable(broker):
    # A write by open() asks for a card: answered once, the approved profile.
    for approve in (False, True):
        r = broker.run_json(SHOW_DIR + (WRITE if approve else ""), approve=approve)
        assert r["exit"] == 0, r
        d, listing, inside = r["stdout"].splitlines()
        assert listing == "[]" and inside == "True", r
        wait_for(lambda: not os.path.exists(d), "the run's output directory %s removed" % d)


def test_second_run_sees_none_of_the_first(broker):
    first = broker.run_json(SHOW_DIR + WRITE, approve=True)
    second = broker.run_json(SHOW_DIR)
    assert first["exit"] == 0 and second["exit"] == 0, (first, second)
    assert first["stdout"].splitlines()[0] != second["stdout"].splitlines()[0]
    assert second["stdout"].splitlines()[1] == "[]"

"""The ``seqcls`` command ends without tearing Python down, but as Python's own exit would:
exit handlers run, threads still running finish, the streams are flushed, the status holds."""

import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from seqcls.cli import command

    atexit.register(lambda: print("exit handler ran"))
    def late():
        time.sleep(0.3)
        print("thread finished")
    threading.Thread(target=late).start()
    sys.stdout.write("buffered, no newline")
    sys.argv = ["seqcls", *sys.argv[1:]]
    command()
    print("never reached")
    """
)


@pytest.mark.parametrize(("args", "status"), [(["--help"], 0), ([], 2)])
def test_the_command_exits_with_main_status_after_handlers_threads_and_streams(
    args: list[str], status: int
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == status, done.stderr
    assert "buffered, no newline" in done.stdout
    assert "thread finished" in done.stdout
    assert "exit handler ran" in done.stdout
    assert "never reached" not in done.stdout
    # The help (stdout for --help, stderr without a subcommand) is flushed too.
    assert "seqcls fit" in done.stdout + done.stderr


def test_a_message_given_to_sys_exit_is_printed_and_exits_1() -> None:
    probe = "import sys\nimport seqcls.cli as cli\n"
    probe += "cli.main = lambda: sys.exit('stopped: why')\ncli.command()\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip() == "stopped: why"


def test_idle_thread_pool_workers_do_not_hold_the_exit() -> None:
    # torch.compile leaves ThreadPoolExecutor workers waiting for work. Python's exit tells
    # them to stop before it waits for threads; an exit that only waited hung forever.
    probe = textwrap.dedent(
        """
        from concurrent.futures import ThreadPoolExecutor
        import seqcls.cli as cli

        pool = ThreadPoolExecutor(2)
        pool.submit(print, "pool worked").result()
        cli.main = lambda: None
        cli.command()
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "pool worked\n"

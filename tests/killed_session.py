"""Not collected by the suite (no ``test_`` prefix): the session test_killed_session.py starts
and then ends with SIGTERM, to show its fixtures are torn down."""

import threading


def test_holds_a_mounted_loop_device_until_killed(loop_device, scratch):
    import subprocess

    dev = loop_device("64M")
    subprocess.run(["mkfs.ext4", "-q", dev], check=True)
    mnt = scratch / "m"
    mnt.mkdir()
    subprocess.run(["mount", dev, str(mnt)], check=True)
    print(f"HOLDING {dev} {mnt}", flush=True)
    threading.Event().wait()  # until the session is killed

"""fsscope as root on a machine other users share: nothing a local user can write may steer
what root formats, mounts, deletes or runs. Each attack is made as a real unprivileged user
(the ``local_user`` fixture), fsscope runs as root."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.privileged


def test_the_local_user_is_real_and_unprivileged(local_user, scratch):
    secret = scratch / "root-only"
    secret.write_text("x")
    secret.chmod(0o600)
    out = local_user.python(f"open({str(secret)!r}).read()", check=False)
    assert out.returncode != 0 and "Permission denied" in out.stderr
    made = local_user.python(f"import os; os.symlink('/etc/passwd', {str(local_user.shared / 'link')!r}); print(os.getuid())")
    assert int(made.stdout) == local_user.uid != 0
    assert os.lstat(local_user.shared / "link").st_uid == local_user.uid

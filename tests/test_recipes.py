"""Recipes: the shipped ones load; broken ones fail with one line naming file and field."""

from __future__ import annotations

import json

import pytest

from fsscope import recipes, records
from fsscope.errors import RecipeError

SHIPPED = ["ext4-default", "ext4-bench", "ext4-journal", "ext4-1k", "xfs-default", "xfs-agcount",
           "btrfs-default", "btrfs-nodatacow", "f2fs-default", "tmpfs"]


def test_every_promised_recipe_ships_and_loads():
    names = {r.name for r in recipes.available()}
    assert set(SHIPPED) <= names
    bench = recipes.load("ext4-bench")
    assert bench.prep.no_lazy_init and bench.prep.null_hash_seed and bench.prep.remount_after_populate
    assert recipes.load("ext4-1k").mkfs_opts == ("-b", "1024")
    assert "data=journal" in recipes.load("ext4-journal").effective_mount_opts()
    assert "nodatacow" in recipes.load("btrfs-nodatacow").effective_mount_opts()


def test_extra_options_and_prep_changes():
    r = recipes.load("xfs-default").with_extra("-i size=1024", "noatime,discard")
    assert r.mkfs_opts[-2:] == ("-i", "size=1024")
    assert r.mount_opts[-2:] == ("noatime", "discard")
    assert recipes.load("ext4-bench").with_prep(drop_caches=False).prep.drop_caches is False
    with pytest.raises(RecipeError, match="unknown prep step 'dropcaches'"):
        recipes.load("ext4-bench").with_prep(dropcaches=False)


@pytest.mark.parametrize("text, message", [
    ('fs = "ext4"\nmkfs_options = []\n', r"broken\.toml: unknown key 'mkfs_options'"),
    ('fs = "ext4"\nmkfs_opts = 3\n', r"broken\.toml: mkfs_opts: expected list, got int 3"),
    ('fs = "zfs"\n', r"broken\.toml: fs: unknown file system 'zfs'"),
    ('mkfs_opts = []\n', r"broken\.toml: fs: missing"),
    ('fs = "xfs"\n[prep]\ndrop_caches = "yes"\n', r"broken\.toml: prep\.drop_caches: expected bool"),
    ('fs = "xfs"\n[prep]\nnull_hash_seed = true\n', r"broken\.toml: prep\.null_hash_seed: applies to ext4 only"),
    ('fs = "ext4"\n[prep]\natime = "sometimes"\n', r"broken\.toml: prep\.atime: 'sometimes' is not one of"),
    ('fs = "ext4\n', r"broken\.toml: not valid TOML"),
])
def test_broken_recipe_names_file_and_field(tmp_path, text, message):
    path = tmp_path / "broken.toml"
    path.write_text(text)
    with pytest.raises(RecipeError, match=message):
        recipes.load(str(path))


def test_unknown_recipe_lists_known_ones():
    with pytest.raises(RecipeError, match="unknown recipe 'ext5'.*xfs-default"):
        recipes.load("ext5")


def test_recipe_round_trips_through_the_job_file():
    r = recipes.load("ext4-bench").with_extra("-I 512", "")
    assert recipes.Recipe.from_dict(json.loads(records.dumps(r))) == r


@pytest.mark.parametrize("items, message", [
    (["atime=never"], r"^--prep atime: 'never' is not one of noatime, relatime, strictatime, keep$"),
    (["drop_caches=maybe"], r"^--prep drop_caches: expected true or false, got 'maybe'$"),
    (["io_scheduler=../../x"], r"^--prep io_scheduler: '\.\./\.\./x' is not a scheduler name"),
    (["null_hash_seed=true"], r"^--prep null_hash_seed: applies to ext4 only, not xfs$"),
    (["drop_caches"], r"^--prep drop_caches: expected STEP=VALUE"),
])
def test_every_prep_value_is_validated_with_the_field_named(items, message):
    with pytest.raises(RecipeError, match=message):
        recipes.load("xfs-default").with_prep(**recipes.prep_changes(items))


def test_prep_values_from_the_command_line_are_typed():
    changes = recipes.prep_changes(["drop_caches=off", "atime=noatime", "io_scheduler=mq-deadline"])
    prep = recipes.load("ext4-default").with_prep(**changes).prep
    assert (prep.drop_caches, prep.atime, prep.io_scheduler) == (False, "noatime", "mq-deadline")


def test_a_recipe_path_that_is_a_directory_says_so(tmp_path):
    with pytest.raises(RecipeError, match=f"recipe {tmp_path}: is a directory, not a recipe file"):
        recipes.load(str(tmp_path))

"""Saving derived indexes: a folder swapped in whole, even when several writers save at once."""

from __future__ import annotations

import threading

from store.atomic import save_folder_atomically


def test_concurrent_writers_never_fail_and_leave_one_complete_copy(tmp_path):
    folder = tmp_path / "index"
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def writer(number: int) -> None:
        def fill(tmp):
            for part in ("a", "b", "c"):
                (tmp / part).write_text(str(number))

        try:
            start.wait()
            for _ in range(25):
                save_folder_atomically(folder, fill)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    contents = {(folder / part).read_text() for part in ("a", "b", "c")}
    assert len(contents) == 1  # one writer's whole copy, never a mix
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]  # no temporary or old folders left


def test_a_failing_fill_leaves_the_previous_copy_and_no_temporary_folder(tmp_path):
    folder = tmp_path / "index"
    save_folder_atomically(folder, lambda tmp: (tmp / "a").write_text("old"))

    def broken(tmp):
        (tmp / "a").write_text("half")
        raise OSError("disk full")

    try:
        save_folder_atomically(folder, broken)
    except OSError as e:
        assert "disk full" in str(e)
    else:
        raise AssertionError("the fill's error was swallowed")
    assert (folder / "a").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]

"""guest.py's use of the host's tools as a user runs it: Debian puts kmod's
modprobe in /usr/sbin, which a user's PATH leaves out, and the guest's
kernel modules are listed with it."""

from module_fixtures import copdrv_ko, guest_module  # noqa: F401


def test_modules_listed_without_sbin_in_path(copdrv_ko, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    files = guest_module.module_files(guest_module.kernel_version(),
                                      ["virtio_console"])
    assert files and files[-1].endswith("virtio_console.ko"), files

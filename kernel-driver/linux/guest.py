#!/usr/bin/python3
"""guest.py - boot a Linux guest that loads copdrv.ko against a register file.

The guest is the installed Debian kernel (linux-image-amd64) booted by
qemu-system-x86_64 through PVH: the uncompressed vmlinux, extracted once
from /boot/vmlinuz-VERSION (the xz stream after its magic), boots in about
three seconds under TCG where the bzImage takes five to eight.  Its
initramfs is an uncompressed newc cpio written here: busybox-static with
its applets as links, copdrv.ko, and an /init that mounts /proc, /sys and
/dev, runs the caller's shell script and powers off.

Streams leave the guest through virtio-serial: each --stream-out FILE is a
port named coprof.streamK whose host side is FILE, and the script finds
its device in $STREAM0, $STREAM1, ...  The virtio modules it needs are
taken from /lib/modules/VERSION (modprobe --show-depends lists them in
load order) and loaded by /init, which waits (at most 10 s) until the
host has announced every port.

A script runs `mdev -s` after `insmod /copdrv.ko`, as /init does after the
ports appear, so that the device nodes exist before anything opens them.

Each register file is one ivshmem-plain device (PCI 1af4:1110) at a fixed
PCI slot, 0x10 for the first, 0x11 for the next, so that a dmesg line
names the file it is about; its memory backend is the file itself, shared,
and the file is padded to a power of two as QEMU requires.  The guest's
console (the script's output and the kernel's messages) is returned.

    guest.py kernel-version
    guest.py run --module build/.../copdrv.ko --regs FILE [--regs FILE...]
                 [--stream-out FILE...] [--timeout S] 'insmod /copdrv.ko'

Needs the Debian packages qemu-system-x86, linux-image-amd64,
linux-headers-amd64 and busybox-static (`make deps`).
"""

import argparse
import glob
import lzma
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

PACKAGES = ("qemu-system-x86 linux-image-amd64 linux-headers-amd64 "
            "busybox-static")
BUSYBOX = "/bin/busybox"
QEMU = "qemu-system-x86_64"
XZ_MAGIC = b"\xfd7zXZ\x00"
FIRST_PCI_SLOT = 0x10
PAGE_SIZE = 4096

VIRTIO_MODULES = ("virtio_pci", "virtio_console")

INIT = """#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
for m in $(cat /modules/order); do insmod /modules/$m || exit 1; done
# The ports appear as the host announces them, and each port's name file
# only once its name has come in a message of its own: wait for all
# names, at most 10 s.
named() {
    n=0
    for p in /sys/class/virtio-ports/*; do
        [ -n "$(cat $p/name 2>/dev/null)" ] && n=$((n + 1))
    done
    echo $n
}
tries=0
while [ $(named) -lt $(cat /modules/ports) ]; do
    tries=$((tries + 1))
    [ $tries -le 1000 ] || { echo "coprof-guest: virtio ports missing"; poweroff -f; }
    usleep 10000
done
mdev -s
for p in /sys/class/virtio-ports/*; do
    [ -e "$p/name" ] || continue
    case "$(cat $p/name)" in
    coprof.stream*) n=$(cat $p/name); export STREAM${n#coprof.stream}=/dev/${p##*/} ;;
    coprof.control) export CONTROL=/dev/${p##*/} ;;
    esac
done
echo coprof-guest: up
sh /script
echo "coprof-guest: script status $?"
poweroff -f
"""


class GuestError(Exception):
    """A guest that cannot be built or booted; str() is one line."""


def _version_key(version):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", version)]


def kernel_version():
    """The newest installed kernel image that has its headers, or None."""
    found = []
    for image in glob.glob("/boot/vmlinuz-*"):
        version = image[len("/boot/vmlinuz-"):]
        if os.path.isdir("/lib/modules/%s/build" % version):
            found.append(version)
    return max(found, key=_version_key) if found else None


def missing_reason():
    """None when a guest can be booted, else one line saying what is missing."""
    if kernel_version() is None:
        return ("no kernel image with its headers in /boot and /lib/modules: "
                "install the Debian packages %s (make deps)" % PACKAGES)
    for tool in (QEMU, BUSYBOX):
        if shutil.which(tool) is None:
            return ("%s not found: install the Debian packages %s "
                    "(make deps)" % (tool, PACKAGES))
    return None


def extract_vmlinux(version, cache_dir):
    """The uncompressed vmlinux of /boot/vmlinuz-VERSION, made once."""
    out = os.path.join(cache_dir, "vmlinux-%s" % version)
    if os.path.exists(out):
        return out
    with open("/boot/vmlinuz-%s" % version, "rb") as f:
        image = f.read()
    at = image.find(XZ_MAGIC)
    if at < 0:
        raise GuestError("/boot/vmlinuz-%s: no xz stream in the image"
                         % version)
    try:
        kernel = lzma.LZMADecompressor(format=lzma.FORMAT_XZ,
                                       ).decompress(image[at:])
    except lzma.LZMAError as e:
        raise GuestError("/boot/vmlinuz-%s: xz stream: %s" % (version, e))
    os.makedirs(cache_dir, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir)
    with os.fdopen(fd, "wb") as f:
        f.write(kernel)
    os.replace(tmp, out)
    return out


class Cpio:
    """An uncompressed newc archive, written entry by entry."""

    def __init__(self, f):
        self.f = f
        self.ino = 1

    def _entry(self, name, mode, data=b""):
        name_bytes = name.encode() + b"\0"
        fields = [self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0,
                  len(name_bytes), 0]
        self.ino += 1
        self.f.write(b"070701" + b"".join(b"%08X" % v for v in fields))
        self.f.write(name_bytes)
        self.f.write(b"\0" * (-(110 + len(name_bytes)) % 4))
        self.f.write(data)
        self.f.write(b"\0" * (-len(data) % 4))

    def directory(self, name):
        self._entry(name, stat.S_IFDIR | 0o755)

    def file(self, name, data, mode=0o644):
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name, target):
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def close(self):
        self._entry("TRAILER!!!", 0)


def busybox_applets():
    out = subprocess.run([BUSYBOX, "--list-full"], capture_output=True,
                         text=True, check=True).stdout
    return [line for line in out.split() if line and line != "bin/busybox"]


def modprobe():
    """kmod's modprobe: in PATH, or in the sbin folders that a user's PATH
    leaves out on Debian."""
    path = os.environ.get("PATH", os.defpath) + ":/usr/sbin:/sbin"
    found = shutil.which("modprobe", path=path)
    if found is None:
        raise GuestError("modprobe: not found in PATH, /usr/sbin or /sbin "
                         "(Debian's kmod package)")
    return found


def module_files(version, names):
    """The .ko files that load names, in load order, each once."""
    files = []
    for name in names:
        out = subprocess.run([modprobe(), "-S", version, "--show-depends",
                              name], capture_output=True, text=True)
        if out.returncode != 0:
            raise GuestError("modprobe --show-depends %s: %s"
                             % (name, out.stderr.strip()))
        for line in out.stdout.splitlines():
            words = line.split()
            if words[:1] == ["insmod"] and words[1] not in files:
                files.append(words[1])
    return files


def write_initramfs(path, module, script, kernel_modules, ports):
    """The guest's root: busybox, the module as /copdrv.ko, the kernel's
    modules under /modules/ (loaded in the order of /modules/order), the
    number of virtio ports to wait for (/modules/ports), /init, /script."""
    with open(BUSYBOX, "rb") as f:
        busybox = f.read()
    with open(module, "rb") as f:
        ko = f.read()
    with open(path, "wb") as f:
        cpio = Cpio(f)
        for d in ("bin", "sbin", "usr", "usr/bin", "usr/sbin", "proc", "sys",
                  "dev", "tmp"):
            cpio.directory(d)
        cpio.file("bin/busybox", busybox, 0o755)
        for applet in busybox_applets():
            cpio.symlink(applet, "/bin/busybox")
        cpio.file("init", INIT.encode(), 0o755)
        cpio.file("script", script.encode(), 0o755)
        cpio.file("copdrv.ko", ko)
        cpio.directory("modules")
        names = []
        for ko_path in kernel_modules:
            names.append(os.path.basename(ko_path))
            with open(ko_path, "rb") as k:
                cpio.file("modules/" + names[-1], k.read())
        cpio.file("modules/order", "".join(n + "\n" for n in names).encode())
        cpio.file("modules/ports", b"%d\n" % ports)
        cpio.close()


def pad_to_power_of_two(path):
    """QEMU's ivshmem wants a power-of-two size of whole pages, the file
    at least that."""
    size = os.path.getsize(path)
    padded = max(1 << max(size - 1, 1).bit_length(), PAGE_SIZE)
    if padded != size:
        os.truncate(path, padded)
    return padded


def qemu_command(vmlinux, initramfs, regs_files, stream_fds=(),
                 stream_files=(), control_fd=None, kernel_args=""):
    """QEMU's command line; stream_fds (the first ports) and control_fd are
    connected sockets QEMU inherits, stream_files (the next) host files."""
    cmd = [QEMU, "-nodefaults", "-display", "none", "-serial", "stdio",
           "-no-reboot", "-m", "256M", "-kernel", vmlinux,
           "-initrd", initramfs,
           "-append", ("console=ttyS0 quiet panic=-1 " + kernel_args).strip()]
    for i, regs in enumerate(regs_files):
        size = pad_to_power_of_two(regs)
        cmd += ["-object", "memory-backend-file,id=regs%d,share=on,"
                "mem-path=%s,size=%d" % (i, regs, size),
                "-device", "ivshmem-plain,memdev=regs%d,addr=0x%x"
                % (i, FIRST_PCI_SLOT + i)]
    chardevs = ["socket,id=stream%d,fd=%d" % (i, fd)
                for i, fd in enumerate(stream_fds)]
    chardevs += ["file,id=stream%d,path=%s" % (len(stream_fds) + i, out)
                 for i, out in enumerate(stream_files)]
    if chardevs or control_fd is not None:
        cmd += ["-device", "virtio-serial-pci"]
    for i, chardev in enumerate(chardevs):
        cmd += ["-chardev", chardev,
                "-device", "virtserialport,chardev=stream%d,"
                "name=coprof.stream%d" % (i, i)]
    if control_fd is not None:
        cmd += ["-chardev", "socket,id=control,fd=%d" % control_fd,
                "-device", "virtserialport,chardev=control,"
                "name=coprof.control"]
    return cmd


def run(module, regs_files, script, stream_files=(), timeout=60,
        cache_dir=None, kernel_args=""):
    """Boots the guest, runs script, returns its console output; what the
    script writes to $STREAMk lands in stream_files[k].  kernel_args are
    added to the kernel's command line (panic_on_warn=1, say)."""
    reason = missing_reason()
    if reason:
        raise GuestError(reason)
    version = kernel_version()
    cache_dir = cache_dir or os.path.join(os.path.dirname(
        os.path.abspath(module)), "guest")
    vmlinux = extract_vmlinux(version, cache_dir)
    with tempfile.TemporaryDirectory(prefix="coprof-guest-") as tmp:
        initramfs = os.path.join(tmp, "initramfs.cpio")
        write_initramfs(initramfs, module, script,
                        module_files(version, VIRTIO_MODULES)
                        if stream_files else [], len(stream_files))
        try:
            done = subprocess.run(qemu_command(vmlinux, initramfs, regs_files,
                                               stream_files=stream_files,
                                               kernel_args=kernel_args),
                                  stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise GuestError("guest: no power-off within %d s" % timeout)
    console = done.stdout.decode(errors="replace").replace("\r\n", "\n")
    if done.returncode != 0:
        raise GuestError("guest: %s exited with status %d: %s"
                         % (QEMU, done.returncode,
                            done.stderr.decode(errors="replace").strip()))
    if "coprof-guest: script status" not in console:
        raise GuestError("guest: the script did not run to its end")
    return console


# ---- A recording session: `guest.py serve` ----------------------------------

# The module's control files a session sets (struct copdrv_params), in the
# order they are written.
SESSION_PARAMS = ("lfsr_value", "lfsr_count", "poll_interval_ns", "clock_hz",
                  "buffer_bytes", "fifo_full", "watermark", "dither",
                  "dither_seed", "event")
START_TIMEOUT = 60      # boot, insmod, parameters, enable
STATS_TIMEOUT = 10
STOP_TIMEOUT = 60       # STOP, the reader's end, rmmod, power-off

# The guest's side of a session.  Its control port (fd 3) carries one
# command a line from the host and one reply a line back: "started" or
# "error REASON" once, then "stats" -> "ok NAME VALUE ...", and "stop" ->
# "stopped warnings=N" (kernel warnings, oopses and bugs in dmesg after
# rmmod; dmesg itself goes to the console).
SESSION_SCRIPT = """fail() { echo "error $*" >&3; echo "coprof-guest: error $*"; exit 1; }
exec 3<>$CONTROL
insmod /copdrv.ko 2>/dev/null || fail "insmod copdrv.ko: $(dmesg | tail -n 1)"
mdev -s
D=$(ls -d /sys/bus/pci/devices/*/copdrv 2>/dev/null | head -n 1)
[ -n "$D" ] || fail "copdrv.ko took no trace unit: $(dmesg | grep copdrv | tail -n 1)"
set_param() { echo "$2" > "$D/$1" 2>/dev/null || fail "$1=$2 refused: $(dmesg | tail -n 1)"; }
%(params)s
if [ -n "$STREAM1" ]; then cat /dev/copdrv | tee $STREAM1 > $STREAM0 &
else cat /dev/copdrv > $STREAM0 &
fi
reader=$!
echo 1 > $D/enable 2>/dev/null || fail "enable: $(dmesg | tail -n 1)"
echo started >&3
while read -r command <&3; do
    case "$command" in
    stats) echo "ok $(tr '\\n' ' ' < /sys/kernel/debug/copdrv/stats)" >&3 ;;
    stop) break ;;
    esac
done
echo 0 > $D/enable
wait $reader
rmmod copdrv || fail "rmmod copdrv failed"
dmesg > /tmp/dmesg
echo "coprof-guest: dmesg:"
cat /tmp/dmesg
echo "stopped warnings=$(grep -c -E 'WARNING:|BUG:|Oops|Call Trace|KASAN' /tmp/dmesg)" >&3
"""

NUMBER = re.compile(r"^(0x[0-9a-fA-F]+|[0-9]+)$")


def parse_param(text):
    """NAME=VALUE of --param: a control file of SESSION_PARAMS and a
    decimal or 0x number."""
    name, _, value = text.partition("=")
    if name not in SESSION_PARAMS or not NUMBER.match(value):
        raise argparse.ArgumentTypeError(
            "%r is not NAME=NUMBER with NAME one of %s"
            % (text, ", ".join(SESSION_PARAMS)))
    return name, value


class Session:
    """One guest that records one session: booted, the module loaded, its
    parameters set and a reader copying /dev/copdrv into the stream port
    before start() returns.  The stream's host end is a socket handed to
    whoever asks for it; QEMU holds the other end, so the stream ends when
    the guest powers off or dies."""

    def __init__(self, module, regs, params, stream_copy=None,
                 cache_dir=None, kernel_args=""):
        reason = missing_reason()
        if reason:
            raise GuestError(reason)
        if not os.path.isfile(module):
            raise GuestError("%s: not built (make builds it once the Debian "
                             "packages %s are installed)" % (module, PACKAGES))
        self.module, self.regs, self.params = module, regs, params
        self.stream_copy = stream_copy
        self.kernel_args = kernel_args
        self.cache_dir = cache_dir or os.path.join(
            os.path.dirname(os.path.abspath(module)), "guest")
        self.qemu = None
        self.control = None
        self.stream = None          # the host's end, until handed over
        self.pending = b""

    def script(self):
        lines = ["set_param %s %s" % (name, value)
                 for name, value in sorted(
                     self.params, key=lambda p: SESSION_PARAMS.index(p[0]))]
        return SESSION_SCRIPT % {"params": "\n".join(lines)}

    def start(self):
        """Boots the guest; returns once the session runs, or raises."""
        import socket
        version = kernel_version()
        vmlinux = extract_vmlinux(version, self.cache_dir)
        tmp = tempfile.TemporaryDirectory(prefix="coprof-guest-")
        try:
            initramfs = os.path.join(tmp.name, "initramfs.cpio")
            copies = [self.stream_copy] if self.stream_copy else []
            write_initramfs(initramfs, self.module, self.script(),
                            module_files(version, VIRTIO_MODULES),
                            2 + len(copies))
            self.stream, guest_stream = socket.socketpair()
            self.control, guest_control = socket.socketpair()
            fds = [guest_stream.fileno(), guest_control.fileno()]
            sys.stdout.flush()
            self.qemu = subprocess.Popen(
                qemu_command(vmlinux, initramfs, [self.regs], [fds[0]],
                             copies, fds[1], self.kernel_args),
                stdin=subprocess.DEVNULL, pass_fds=fds)
            guest_stream.close()
            guest_control.close()
            reply = self.receive(START_TIMEOUT, "to start the session")
        finally:
            tmp.cleanup()       # QEMU has read the initramfs by now
        if reply != "started":
            self.kill()
            raise GuestError("guest: %s" % reply.partition(" ")[2])

    def receive(self, timeout, what):
        """The guest's next reply line; GuestError when it powered off or
        died first, or after timeout seconds."""
        import select
        import time
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise GuestError("guest: no answer within %d s %s"
                                 % (timeout, what))
            ready, _, _ = select.select([self.control], [], [], min(left, 1))
            try:
                data = self.control.recv(4096) if ready else None
            except OSError:
                data = b""
            if data == b"" or (data is None and self.qemu.poll() is not None):
                raise self.gone(what)
            self.pending += data or b""
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode(errors="replace").strip()

    def gone(self, what):
        """The error of a guest whose control port closed: how QEMU ended
        (it is killed if it still runs)."""
        try:
            self.qemu.wait(5)
        except subprocess.TimeoutExpired:
            self.kill()
        return GuestError("guest: %s %s before it answered %s"
                          % (QEMU, describe_end(self.qemu.returncode), what))

    def send(self, command, what):
        try:
            self.control.sendall(command)
        except OSError:
            raise self.gone(what)

    def stats(self):
        """The module's statistics, NAME VALUE ... on one line."""
        self.send(b"stats\n", "for the statistics")
        reply = self.receive(STATS_TIMEOUT, "for the statistics")
        if not reply.startswith("ok "):
            raise GuestError("guest: unexpected reply %r" % reply)
        return reply[3:]

    def stop(self):
        """Stops the session (the stream ends with STOP), unloads the
        module, powers off; the number of kernel warnings in dmesg."""
        self.send(b"stop\n", "to stop")
        reply = self.receive(STOP_TIMEOUT, "to stop")
        if not reply.startswith("stopped warnings="):
            self.kill()
            raise GuestError("guest: %s" % reply.partition(" ")[2])
        try:
            self.qemu.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise GuestError("guest: no power-off within %d s"
                             % STOP_TIMEOUT)
        return int(reply.partition("=")[2])

    def alive(self):
        return self.qemu is not None and self.qemu.poll() is None

    def kill(self):
        if self.qemu is not None and self.qemu.poll() is None:
            self.qemu.kill()
            self.qemu.wait()


def describe_end(status):
    if status is None:
        return "went silent"
    if status < 0:
        return "was killed by signal %d" % -status
    return "exited with status %d" % status


def serve(listener, session, parent):
    """Answers one request a connection on listener, a line each:
    "start" -> "ok" with the stream's socket attached (SCM_RIGHTS), "stats"
    -> "ok NAME VALUE ..." (the stats file), "params" -> "ok NAME VALUE ..."
    (the --params), "stop" -> "ok warnings=N" (then serve ends);
    "error REASON" when it fails.  Ends, stopping the guest, when the guest
    dies or process parent (if given) has ended."""
    import select
    import socket
    while True:
        ready, _, _ = select.select([listener], [], [], 1)
        if parent and not os.path.exists("/proc/%d" % parent):
            session.kill()
            print("guest.py: process %d ended: guest stopped" % parent)
            return 1
        if session.qemu is not None and not session.alive():
            print("guest.py: guest: %s %s during the session"
                  % (QEMU, describe_end(session.qemu.returncode)))
            return 1
        if not ready:
            continue
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(5)
            try:
                request = conn.makefile("rb").readline().decode().strip()
            except (OSError, UnicodeDecodeError):
                continue
            done = False
            try:
                if request == "start" and session.qemu is None:
                    session.start()
                    socket.send_fds(conn, [b"ok\n"], [session.stream.fileno()])
                    session.stream.close()
                    reply = None
                elif request == "stats" and session.alive():
                    reply = "ok " + session.stats()
                elif request == "params" and session.alive():
                    reply = "ok " + " ".join("%s %s" % p
                                             for p in session.params)
                elif request == "stop" and session.alive():
                    reply = "ok warnings=%d" % session.stop()
                    done = True
                elif session.qemu is not None and not session.alive():
                    # Dead before serve's own look saw it: say how.
                    reply = "error guest: %s %s during the session" % (
                        QEMU, describe_end(session.qemu.returncode))
                    done = True
                else:
                    reply = "error %r: not now (the guest %s)" % (
                        request, "runs" if session.alive() else "is down")
            except GuestError as e:
                reply, done = "error %s" % e, True
            except OSError as e:
                reply, done = "error guest: %s" % e, True
            if reply and (done or request not in ("stats", "params")):
                print("guest.py serve: %s -> %s" % (request, reply),
                      flush=True)
            if reply:
                try:
                    conn.sendall(reply.encode() + b"\n")
                except OSError:
                    pass
            if done:
                session.kill()
                return 0 if reply.startswith("ok") else 1


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="guest.py",
        description="Boot a Linux guest (the installed Debian kernel, PVH, "
        "a busybox initramfs) with copdrv.ko and each register file as an "
        "ivshmem device, run a shell script in it and print its console.",
        epilog="Register files are padded to a power of two; the first is "
        "PCI slot 0x10, the next 0x11, ...  Needs the Debian packages "
        + PACKAGES + " (make deps).")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("kernel-version",
                   help="print the kernel version the module is built for")
    p = sub.add_parser("run", help="boot, run the script, power off")
    p.add_argument("--module", required=True, help="copdrv.ko")
    p.add_argument("--regs", action="append", default=[],
                   help="a register file (repeatable)")
    p.add_argument("--stream-out", action="append", default=[],
                   help="a host file that receives what the script writes "
                   "to $STREAM0, the next $STREAM1, ... (repeatable)")
    p.add_argument("--timeout", type=int, default=60,
                   help="seconds until the guest must have powered off "
                   "(default 60)")
    p.add_argument("script", help="shell commands run in the guest")
    p = sub.add_parser(
        "serve", help="record one session through the module, serving "
        "start, stats and stop on a listening socket",
        description="Boots a guest with the register file as ivshmem at "
        "the first request 'start': copdrv.ko loaded, each --param written "
        "to its control file, a reader copying /dev/copdrv to a "
        "virtio-serial port, enable set; the reply 'ok' carries the host "
        "end of that stream (a socket) as SCM_RIGHTS.  'stats' answers 'ok "
        "NAME VALUE ...' (the module's stats file); 'stop' stops the "
        "session (the stream ends with STOP), unloads the module, powers "
        "off and answers 'ok warnings=N' (kernel warnings in dmesg).  A "
        "failure answers 'error REASON' on one line.  The guest's console "
        "goes to standard output.")
    p.add_argument("--module", required=True, help="copdrv.ko")
    p.add_argument("--regs", required=True, help="copsim's register file")
    p.add_argument("--listen-fd", type=int, required=True,
                   help="a listening unix stream socket, inherited")
    p.add_argument("--param", type=parse_param, action="append",
                   default=[], metavar="NAME=VALUE",
                   help="a control file and its value (repeatable): "
                   + ", ".join(SESSION_PARAMS))
    p.add_argument("--stream-copy", metavar="FILE",
                   help="a copy of the stream into FILE (a second port)")
    p.add_argument("--parent", type=int, default=0,
                   help="stop the guest and end when process PARENT ends")
    args = parser.parse_args(argv)
    if args.command == "kernel-version":
        version = kernel_version()
        if version is None:
            print("guest.py: %s" % missing_reason(), file=sys.stderr)
            return 1
        print(version)
        return 0
    if args.command == "serve":
        import signal
        import socket
        listener = socket.socket(fileno=args.listen_fd)
        session = None
        # SIGTERM (a caller that gave up) stops the guest on the way out.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
        try:
            session = Session(args.module, args.regs, args.param,
                              args.stream_copy)
            return serve(listener, session, args.parent)
        except GuestError as e:
            listener.settimeout(30)
            print("guest.py: %s" % e, flush=True)
            try:        # the first request gets the reason
                conn, _ = listener.accept()
                conn.sendall(b"error %s\n" % str(e).encode())
                conn.close()
            except OSError:
                pass
            return 1
        finally:
            if session:
                session.kill()
    try:
        sys.stdout.write(run(args.module, args.regs, args.script,
                             args.stream_out, args.timeout))
    except GuestError as e:
        print("guest.py: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("guest.py: %s: %s" % (e.filename, e.strerror), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

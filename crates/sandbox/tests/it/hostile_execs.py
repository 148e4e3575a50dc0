"""Starts /usr/bin/true by every route a program has, to hide an exec from a tracer: fork
then exec, posix_spawn, vfork, exec from a thread, execveat, a memfd (fexecve and
/proc/self/fd/N), a grandchild that outlives its parent, a child that exits at once, and
50 times in a loop. Each `true` gets its route as its argument."""
import ctypes
import os
import subprocess
import sys
import threading
import time

TRUE = "/usr/bin/true"


def route(name, fn):
    # Each route's process runs `true` with the route's name as its argument. Only the
    # route's own child is waited for (a sandbox may give the program other children).
    pid = fn(name)
    if pid:
        os.waitpid(pid, 0)


def fork_exec(tag):
    pid = os.fork()
    if pid == 0:
        os.execv(TRUE, [TRUE, tag])
    return pid


def spawn(tag):
    return os.posix_spawn(TRUE, [TRUE, tag], os.environ)


def vfork(tag):
    # glibc's posix_spawn is clone(CLONE_VM|CLONE_VFORK); this asks for vfork by name.
    libc = ctypes.CDLL(None, use_errno=True)
    argv = (ctypes.c_char_p * 3)(TRUE.encode(), tag.encode(), None)
    pid = ctypes.c_int()
    attr = ctypes.create_string_buffer(512)
    libc.posix_spawnattr_init(attr)
    libc.posix_spawnattr_setflags(attr, ctypes.c_short(0x40))  # POSIX_SPAWN_USEVFORK
    libc.posix_spawn(ctypes.byref(pid), TRUE.encode(), None, attr, argv, None)
    return pid.value


def thread_exec(tag):
    pid = os.fork()
    if pid == 0:
        t = threading.Thread(target=lambda: os.execv(TRUE, [TRUE, tag]))
        t.start()
        time.sleep(5)
        os._exit(9)
    return pid


def execveat(tag):
    pid = os.fork()
    if pid == 0:
        fd = os.open(TRUE, os.O_RDONLY)
        os.execve(fd, [TRUE, tag], dict(os.environ))  # fexecve: execveat(fd, "", AT_EMPTY_PATH)
    return pid


def memfd_fexecve(tag):
    pid = os.fork()
    if pid == 0:
        fd = os.memfd_create("hidden", 0)
        with open(TRUE, "rb") as f:
            os.write(fd, f.read())
        os.execve(fd, [TRUE, tag], dict(os.environ))
    return pid


def memfd_proc(tag):
    pid = os.fork()
    if pid == 0:
        fd = os.memfd_create("hidden2", 0)
        with open(TRUE, "rb") as f:
            os.write(fd, f.read())
        os.execv(f"/proc/self/fd/{fd}", [TRUE, tag])
    return pid


def orphan(tag):
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            time.sleep(0.3)  # its parent is long gone by now
            os.execv(TRUE, [TRUE, tag])
        os._exit(0)
    os.waitpid(pid, 0)
    # The grandchild is not ours to wait for: give it time to run before we go on.
    time.sleep(0.8)


def quick(tag):
    # A child that exits within microseconds of its start, without an exec.
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    return pid


for name, fn in [
    ("fork-exec", fork_exec),
    ("posix-spawn", spawn),
    ("vfork", vfork),
    ("thread-exec", thread_exec),
    ("execveat", execveat),
    ("memfd-fexecve", memfd_fexecve),
    ("memfd-proc", memfd_proc),
    ("orphan", orphan),
    ("quick", quick),
]:
    route(name, fn)
for i in range(50):
    subprocess.run([TRUE, f"loop-{i}"], check=True)
print("done")

"""A program started on a new pty as a user's terminal starts it (the tests' python pty drivers):
its own session with the pty as controlling terminal, the pty sized before it starts, the given
environment added. The caller holds the master: it reads the output, types, resizes."""
import fcntl
import os
import struct
import termios


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def spawn(argv, rows, cols, env):
    """(pid, master) of argv running on a new rows x cols pty with env added to its environment."""
    m, s = os.openpty()
    set_size(s, rows, cols)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        fcntl.ioctl(s, termios.TIOCSCTTY, 0)
        for fd in (0, 1, 2):
            os.dup2(s, fd)
        os.close(m)
        os.environ.update(env)
        os.execvp(argv[0], argv)
    os.close(s)
    return pid, m

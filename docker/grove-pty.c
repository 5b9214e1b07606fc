/* grove-pty: runs a command on a fresh pseudo-terminal and relays its bytes, for the workspace terminal.
 *
 * Usage: grove-pty COLS ROWS -- PROGRAM [ARGS...]
 *   stdin  -> the pty (keyboard bytes, relayed verbatim)
 *   pty    -> stdout (terminal output, verbatim)
 *   fd 3   <- control channel: a stream of fixed 5-byte frames, 'R' then cols and rows as big-endian u16.
 * Control travels on its own descriptor, so no terminal byte can ever be read as a control message.
 * The backend starts this as the agent's user (node spawn uid/gid), so the shell holds no capability.
 * Exit status: the program's (128+signal when it was killed). Built with gcc -static by docker/build-image.sh.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

static int parse_dim(const char *s) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 1 || v > 1000) return -1;
  return (int)v;
}

int main(int argc, char **argv) {
  if (argc < 5 || strcmp(argv[3], "--") != 0) {
    fprintf(stderr, "usage: grove-pty COLS ROWS -- PROGRAM [ARGS...]\n");
    return 2;
  }
  int cols = parse_dim(argv[1]), rows = parse_dim(argv[2]);
  if (cols < 0 || rows < 0) {
    fprintf(stderr, "grove-pty: COLS and ROWS must be 1..1000\n");
    return 2;
  }
  struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
  int master = -1;
  pid_t child = forkpty(&master, NULL, NULL, &ws);
  if (child < 0) {
    perror("grove-pty: forkpty");
    return 1;
  }
  if (child == 0) {
    /* The control channel is ours, not the shell's. */
    close(3);
    signal(SIGPIPE, SIG_DFL);
    execvp(argv[4], &argv[4]);
    perror("grove-pty: exec");
    _exit(127);
  }
  signal(SIGPIPE, SIG_IGN);

  int ctl = fcntl(3, F_GETFD) == -1 ? -1 : 3;
  unsigned char frame[5];
  size_t have = 0;
  char buf[16384];
  int in_open = 1;
  int status = 0, reaped = 0;
  for (;;) {
    /* Not every kernel reports EIO on the master when the last slave closes (gVisor does not), so the
     * shell's exit is also watched directly: once it is gone, what is left in the pty is drained below. */
    if (waitpid(child, &status, WNOHANG) == child) {
      reaped = 1;
      fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
      ssize_t n;
      while ((n = read(master, buf, sizeof buf)) > 0) {
        if (write_all(1, buf, (size_t)n) < 0) break;
      }
      break;
    }
    struct pollfd fds[3] = {
        {.fd = master, .events = POLLIN},
        {.fd = in_open ? 0 : -1, .events = POLLIN},
        {.fd = ctl, .events = POLLIN},
    };
    if (poll(fds, 3, 250) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = read(master, buf, sizeof buf);
      /* EIO: every slave descriptor is closed, i.e. the shell and its children are gone. */
      if (n <= 0 && !(n < 0 && errno == EINTR)) break;
      if (n > 0 && write_all(1, buf, (size_t)n) < 0) break;
    }
    if (in_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = read(0, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EINTR)) {
        /* The backend went away: hang the terminal up, as closing a terminal window does. */
        in_open = 0;
        kill(-child, SIGHUP);
        kill(child, SIGHUP);
      } else if (n > 0 && write_all(master, buf, (size_t)n) < 0) {
        break;
      }
    }
    if (ctl >= 0 && (fds[2].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = read(ctl, frame + have, sizeof frame - have);
      if (n == 0 || (n < 0 && errno != EINTR)) {
        ctl = -1;
      } else if (n > 0) {
        have += (size_t)n;
        if (have == sizeof frame) {
          have = 0;
          if (frame[0] == 'R') {
            unsigned c = ((unsigned)frame[1] << 8) | frame[2], r = ((unsigned)frame[3] << 8) | frame[4];
            if (c >= 1 && c <= 1000 && r >= 1 && r <= 1000) {
              struct winsize nws = {.ws_row = (unsigned short)r, .ws_col = (unsigned short)c};
              ioctl(master, TIOCSWINSZ, &nws); /* the kernel sends the foreground group SIGWINCH */
            }
          }
        }
      }
    }
  }
  close(master);
  while (!reaped && waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

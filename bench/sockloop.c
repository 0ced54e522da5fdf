// Unix socket calls the supervisor judges (sandbox/socket_address_gate.hpp):
// N connect()s to a listener bound in the working directory (each accepted
// and closed), then N datagrams sent with sendmsg() and N with sendto() to a
// datagram socket bound there, each received. Under exguardian every one is a
// round trip through the supervisor; bare and under bwrap none is.
//   sockloop N
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un address(const char* path) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  strncpy(a.sun_path, path, sizeof a.sun_path - 1);
  return a;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  struct sockaddr_un ls = address("sockloop.stream"), ds = address("sockloop.dgram");
  unlink(ls.sun_path);
  unlink(ds.sun_path);
  int l = socket(AF_UNIX, SOCK_STREAM, 0), r = socket(AF_UNIX, SOCK_DGRAM, 0), d = socket(AF_UNIX, SOCK_DGRAM, 0);
  if (l < 0 || r < 0 || d < 0 || bind(l, (struct sockaddr*)&ls, sizeof ls) != 0 || listen(l, 16) != 0 ||
      bind(r, (struct sockaddr*)&ds, sizeof ds) != 0) {
    perror("sockloop: set-up");
    return 1;
  }
  char buf[64] = "sockloop";
  for (int i = 0; i < n; ++i) {
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr*)&ls, sizeof ls) != 0) {
      perror("sockloop: connect");
      return 1;
    }
    int a = accept(l, NULL, NULL);
    close(a);
    close(c);
  }
  for (int i = 0; i < n; ++i) {
    struct iovec iov = {buf, 8};
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_name = &ds;
    mh.msg_namelen = sizeof ds;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (sendmsg(d, &mh, 0) != 8 || sendto(d, buf, 8, 0, (struct sockaddr*)&ds, sizeof ds) != 8) {
      perror("sockloop: send");
      return 1;
    }
    if (recv(r, buf, sizeof buf, 0) != 8 || recv(r, buf, sizeof buf, 0) != 8) {
      perror("sockloop: recv");
      return 1;
    }
  }
  unlink(ls.sun_path);
  unlink(ds.sun_path);
  return 0;
}

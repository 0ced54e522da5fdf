/* A syscall-heavy loop for bench/syscalls.sh: stat + open + read + close of
   every regular file under a tree, N rounds. Prints the number of files. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static long files;

static int visit(const char* path, const struct stat* st, int type, struct FTW* f) {
  (void)f;
  if (type != FTW_F || !S_ISREG(st->st_mode)) return 0;
  struct stat again;
  if (stat(path, &again) != 0) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[512];
    (void)read(fd, buf, sizeof buf);
    close(fd);
  }
  files++;
  return 0;
}

int main(int argc, char** argv) {
  const char* root = argc > 1 ? argv[1] : "/usr/include";
  int rounds = argc > 2 ? atoi(argv[2]) : 1;
  for (int r = 0; r < rounds; r++) nftw(root, visit, 64, FTW_PHYS);
  printf("%ld\n", files);
  return 0;
}

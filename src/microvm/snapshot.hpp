// The microVM layer's fast path: a template guest saved once, each new
// sandbox restored from it.
//
// The template is a guest parked at the hand-over point (boot_record.hpp):
// kernel booted, modules loaded, the agent's port open, nothing of any
// sandbox mounted or known (its kernel command line carries no identity, its
// 9p export was never attached: qemu 7.2 refuses to migrate a mounted 9p).
// The first cold boot of a configuration saves it (QMP stop, migrate to an
// fd, cont) and goes on as that sandbox; later launches start qemu with
// `-incoming defer` and load it (getfd + migrate-incoming over QMP), then
// push their own boot record: uid, hostname, clock, RNG seed. Each restored
// guest gets its own 9p export (the same in-jail path, /.exg-view, is that
// sandbox's view) and mounts it only after the restore.
//
// Safety: the state file is one migration stream (device state and the
// guest's non-zero RAM pages); a restore copies it into the new qemu's own
// anonymous memory, so no sandbox shares writable memory with another or
// with the template. qemu gets only a read-only fd of it (passed over QMP),
// never its path. It holds no secret: nothing of a sandbox has reached the
// guest when it is saved. Files: `<key>.state` in a directory owned by root
// (or, for an ordinary user, by that user) and writable by no one else;
// the key hashes everything the saved state depends on (the qemu binary,
// kernel and initramfs, the full qemu command line but the VM's name).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "microvm/guest_image.hpp"
#include "microvm/qmp.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::microvm {

// EXG_MICROVM_SNAPSHOT=off: always boot cold (and save nothing); default on.
bool snapshots_enabled();

// The key of a configuration: hex SHA-256 over the template format version,
// the qemu binary's and the image files' identity (device, inode, size,
// mtime), the initramfs's content, and `argv` without "-name X".
Result<std::string> template_key(const GuestImage& img, const std::vector<std::string>& argv);

// Where templates are read and written: $EXG_MICROVM_SNAPSHOT_DIR, else
// /var/cache/exguardian/microvm for root; an ordinary user writes its own in
// ${XDG_CACHE_HOME:-~/.cache}/exguardian/microvm and reads those first, then root's.
std::vector<std::string> template_read_dirs();
std::string template_write_dir();

struct Template {
  std::string path;
  UniqueFd fd;  // O_RDONLY
};
// The template for `key`, when one is there and safe to use (a regular file
// owned by root or by us, in such a directory, writable by no one else).
std::optional<Template> find_template(const std::string& key);

// On a guest parked at the hand-over point: stop, save its state into a new
// template for `key` (written beside, renamed in whole), cont, then bound the
// directory (prune_templates). Returns the template's path. The guest runs on
// after it (also when saving failed).
Result<std::string> save_template(Qmp& qmp, const std::string& key);

// The bound on the templates of one directory: a template is one
// configuration (qemu, kernel, initramfs, memory, CPUs...), about 80 MB, and
// each new configuration saves one more. EXG_MICROVM_SNAPSHOT_MAX (a size:
// "2G", "500M"), default 1G. A bad value is an error naming it.
constexpr uint64_t kDefaultTemplateCacheBytes = 1ull << 30;
Result<uint64_t> template_cache_limit();

// What a template directory holds: its `<key>.state` files, and saves that
// never finished (`.<key>.XXXXXX`: the saver died).
struct CachedTemplate {
  std::string name;
  uint64_t bytes = 0;
  int64_t used_sec = 0;  // mtime: set at the save, and again at each use (find_template)
  bool partial = false;
};
// Which of them to remove: every partial save older than 10 minutes (a save
// takes at most 2), then the least recently used templates until the rest fit
// in `limit`. `keep` (the template just saved) is never removed, even when it
// alone is over the limit.
std::vector<std::string> templates_to_prune(std::vector<CachedTemplate> files, uint64_t limit,
                                            const std::string& keep, int64_t now_sec);
// Lists `dir`'s templates (nothing else there: the KVM proof file stays).
std::vector<CachedTemplate> list_templates(const std::string& dir);
// Removes what templates_to_prune picks in `dir`; returns the names removed.
// (A sandbox restoring from a removed template keeps its open descriptor.)
std::vector<std::string> prune_templates(const std::string& dir, uint64_t limit, const std::string& keep);

// On a qemu started with -incoming defer: load `tmpl` and run the guest.
Result<void> restore_template(Qmp& qmp, int tmpl_fd);

}  // namespace exg::microvm

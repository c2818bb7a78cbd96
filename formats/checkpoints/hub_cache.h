// Checkpoints named by model id, found in the local Hugging Face cache the way huggingface_hub
// finds them offline (huggingface/huggingface_hub : src/huggingface_hub/constants.py for the
// cache directory, file_download.py `try_to_load_from_cache` for refs and snapshots). Nothing
// here touches the network: an id that is not in the cache is bad input naming where it looked.
//
//   <cache>/models--<org>--<name>/
//     refs/<branch or tag>          a file holding the commit hash it points at
//     snapshots/<commit>/<file>     the repository's files, as symlinks into blobs/
//     blobs/<sha256 or git sha1>    the bytes
#pragma once

#include <string>

namespace moepack::ckpt {

// Where a checkpoint argument leads. For a path, only `path` is set.
struct CheckpointLocation {
  std::string path;      // what to open: the argument itself, or the snapshot directory
  std::string model_id;  // "org/name" when the argument named a cached model
  std::string revision;  // the revision asked for ("main" when none was)
  std::string commit;    // the snapshot it resolved to
  bool from_hub_cache() const { return !model_id.empty(); }
};

// The hub cache directory: HF_HUB_CACHE, else the legacy HUGGINGFACE_HUB_CACHE, else
// HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub; a leading
// `~` and $VAR / ${VAR} are expanded as Python's expanduser and expandvars do. A variable set
// to the empty string counts as unset.
std::string hub_cache_dir();

// Whether `text` has the shape of a Hub model id, `org/name` or `org/name@revision` (names of
// letters, digits, `-`, `_` and `.`, without `--` or `..`, as the Hub allows them).
bool looks_like_model_id(const std::string& text);

// A path that exists is taken as it is. Otherwise an argument shaped like a model id is looked
// up in hub_cache_dir(): refs/<revision> gives the commit (a revision without a ref, such as a
// full commit hash, names the snapshot directly), and snapshots/<commit> must be a directory.
// Anything else, or an id the cache does not hold, is Error(bad_input) naming the paths tried.
CheckpointLocation locate_checkpoint(const std::string& argument);

}  // namespace moepack::ckpt

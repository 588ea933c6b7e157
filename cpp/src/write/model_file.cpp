#include "fastonnx/model_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fastonnx/prefetch.h"
#include "fastonnx/read_pages.h"

namespace fastonnx {
namespace {

// protobuf refuses to parse a message of 2 GB or more.
constexpr size_t kMaxProtoBytes = (size_t{1} << 31) - 1;

// Thrown from the sink on an I/O error, to stop the producer.
struct WriteFailed {
  int err;
};

// Keeps a large file's written pages from filling the machine's memory: each piece is handed to
// the disk as soon as it is written (sync_file_range starts the writeback without waiting), and
// the pieces more than kWritebackBytes behind the writer, whose writeback has had that long to
// finish, are waited for and dropped from the page cache. The writer then runs at the disk's
// speed with a bounded amount of dirty memory, whatever the model's size, instead of leaving
// gigabytes of dirty pages for the kernel to flush later (which stalls every process on the
// machine). A file system without sync_file_range only loses the dropping: the calls' errors are
// ignored.
class WrittenPages {
 public:
  explicit WrittenPages(int fd) : fd_(fd) {}

  void piece_written(size_t end) {
    ::sync_file_range(fd_, static_cast<off_t>(flushed_), static_cast<off_t>(end - flushed_), SYNC_FILE_RANGE_WRITE);
    flushed_ = end;
    if (flushed_ - dropped_ > kWritebackBytes) {
      const size_t upto = flushed_ - kWritebackBytes;
      ::sync_file_range(fd_, static_cast<off_t>(dropped_), static_cast<off_t>(upto - dropped_),
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
      ::posix_fadvise(fd_, static_cast<off_t>(dropped_), static_cast<off_t>(upto - dropped_), POSIX_FADV_DONTNEED);
      dropped_ = upto;
    }
  }

 private:
  // The writeback in flight: a window of 256 MB wrote 8 GB 12 % faster than one piece's on the
  // development machine (the disk is given more to do at once), and stays small beside memory.
  static constexpr size_t kWritebackBytes = size_t{256} << 20;

  int fd_;
  size_t flushed_ = 0;  // writeback started for [0, flushed_)
  size_t dropped_ = 0;  // written back and dropped: [0, dropped_)
};

}  // namespace

void write_file(const std::string& path, const std::function<void(const ByteSink&)>& produce,
                const BetweenPieces& between_pieces) {
  // Not truncated on opening: ext4 (auto_da_alloc) starts flushing a file truncated to size 0
  // when it is closed, which doubled the cost of writing a large model. The caller's file is a
  // new, empty temporary; an existing longer file is cut to size at the end instead.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), path);
  std::FILE* f = ::fdopen(fd, "wb");
  if (f == nullptr) {
    const int err = errno;
    ::close(fd);
    throw std::system_error(err, std::generic_category(), path);
  }
  size_t unreported = 0, written = 0;
  WrittenPages pages(fd);
  const auto end_piece = [&] {
    const size_t piece = unreported;
    unreported = 0;
    if (std::fflush(f) != 0) throw WriteFailed{errno};  // NOLINT(bugprone-std-exception-baseclass): caught below
    pages.piece_written(written);
    drop_all_read_pages();  // the checkpoint pages read for this piece (read_pages.h)
    between_pieces(piece);
  };
  try {
    produce([&](const void* data, size_t size) {
      const char* bytes = static_cast<const char*>(data);
      while (size > 0) {
        const size_t n = std::min(size, kWritePiece - unreported);
        if (std::fwrite(bytes, 1, n, f) != n)
          throw WriteFailed{errno};  // NOLINT(bugprone-std-exception-baseclass): control flow, caught below
        written += n;
        bytes += n;
        size -= n;
        unreported += n;
        if (unreported == kWritePiece) end_piece();
      }
    });
    if (unreported > 0) end_piece();
  } catch (const WriteFailed& failed) {
    std::fclose(f);
    throw std::system_error(failed.err, std::generic_category(), path);
  } catch (...) {
    std::fclose(f);
    throw;
  }
  struct stat st;
  if (std::fflush(f) != 0 || ::fstat(fd, &st) != 0 ||
      (static_cast<size_t>(st.st_size) > written && ::ftruncate(fd, static_cast<off_t>(written)) != 0)) {
    const int err = errno;
    std::fclose(f);
    throw std::system_error(err, std::generic_category(), path);
  }
  if (std::fclose(f) != 0) throw std::system_error(errno, std::generic_category(), path);
}

void write_model(const std::function<ProtoMessage(ExternalData*)>& serialize, const std::string& path,
                 const std::string& data_path, const std::string& location, const BetweenPieces& between_pieces,
                 std::vector<ExternalData::Reference> references, const std::function<void(size_t)>& will_write) {
  if (location.empty()) {
    const ProtoMessage proto = serialize(nullptr);
    if (will_write) will_write(proto.size());
    write_file(
        path,
        [&](const ByteSink& sink) {
          Prefetcher ahead(proto.computed());
          proto.produce(sink, &ahead);
        },
        between_pieces);
    return;
  }
  write_models({{serialize, path}}, data_path, location, between_pieces, std::move(references), will_write);
}

void write_models(const std::vector<ModelToWrite>& models, const std::string& data_path, const std::string& location,
                  const BetweenPieces& between_pieces, std::vector<ExternalData::Reference> references,
                  const std::function<void(size_t)>& will_write) {
  ExternalData external;
  external.location = location;
  external.references = std::move(references);
  std::vector<ProtoMessage> protos;
  size_t total = 0;
  for (const ModelToWrite& model : models) {
    protos.push_back(model.serialize(&external));
    total += protos.back().size();
  }
  if (will_write) will_write(external.size + total);
  write_file(
      data_path,
      [&](const ByteSink& sink) {
        Prefetcher ahead(external.computed());
        write_external_data(external, sink, &ahead);
      },
      between_pieces);
  for (size_t i = 0; i < models.size(); ++i) {
    write_file(models[i].path, [&](const ByteSink& sink) { protos[i].produce(sink); }, between_pieces);
  }
}

std::string model_bytes(const ProtoMessage& proto) {
  if (proto.size() > kMaxProtoBytes) {
    throw std::length_error("the model is " + std::to_string(proto.size()) +
                            " bytes with its weights, beyond protobuf's 2 GB; save it with external data");
  }
  return proto.to_string();
}

}  // namespace fastonnx

#include "training/checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/crc32c.h"

namespace lockstep::training {
namespace {

namespace fs = std::filesystem;

// "LSCKPT1\n", uint64 header length, the JSON header, the floats in header order, then the
// CRC-32C (masked) of everything before it.
constexpr char kMagic[] = "LSCKPT1\n";
constexpr size_t kMagicSize = 8;

void PutU64(uint64_t v, std::string& out) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

// The checkpoints in `dir`, oldest first: (step, path).
std::vector<std::pair<int64_t, fs::path>> List(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "checkpoint-", suffix = ".ckpt";
    if (!name.starts_with(prefix) || !name.ends_with(suffix)) continue;
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    out.emplace_back(std::stoll(digits), entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

StatusOr<std::string> WriteCheckpoint(const std::string& dir, const Checkpoint& c, int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return FailedPrecondition("checkpoint.dir '" + dir + "': " + ec.message());
  nlohmann::json header = {{"step", c.step}, {"epoch", c.epoch}, {"batches_done", c.batches_done}};
  nlohmann::json tensors = nlohmann::json::array();
  std::string data;
  auto add = [&](const std::string& name, const std::vector<float>& values) {
    tensors.push_back({{"name", name}, {"count", values.size()}});
    data.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  };
  for (const auto& [name, values] : c.weights) add("weight:" + name, values);
  for (const auto& [name, values] : c.best_weights) add("best:" + name, values);
  if (c.best_metric) header["best_metric"] = *c.best_metric;
  for (const auto& [name, slots] : c.optimizer_state) {
    for (size_t s = 0; s < slots.size(); ++s) add("state" + std::to_string(s) + ":" + name, slots[s]);
  }
  header["tensors"] = tensors;
  const std::string json = header.dump();
  std::string bytes(kMagic, kMagicSize);
  PutU64(json.size(), bytes);
  bytes += json;
  bytes += data;
  const uint32_t crc = MaskCrc32c(Crc32c(bytes));
  for (int i = 0; i < 4; ++i) bytes += static_cast<char>((crc >> (8 * i)) & 0xff);

  const fs::path final_path = fs::path(dir) / ("checkpoint-" + std::to_string(c.step) + ".ckpt");
  const fs::path temp = fs::path(dir) / (".checkpoint-" + std::to_string(c.step) + ".tmp");
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      fs::remove(temp, ec);
      return DataLoss("cannot write checkpoint '" + temp.string() + "': " + std::strerror(errno));
    }
  }
  fs::rename(temp, final_path, ec);
  if (ec) return DataLoss("cannot rename checkpoint into '" + final_path.string() + "': " + ec.message());
  auto all = List(dir);
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 1)) < all.size(); ++i)
    fs::remove(all[i].second, ec);
  return final_path.string();
}

StatusOr<Checkpoint> ReadLatestCheckpoint(const std::string& dir) {
  const auto all = List(dir);
  if (all.empty()) return NotFound("no checkpoint in '" + dir + "'");
  const fs::path path = all.back().second;
  const std::string where = "checkpoint '" + path.string() + "'";
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  if (bytes.size() < kMagicSize + 12 || bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0) {
    return DataLoss(where + ": not a Lockstep checkpoint");
  }
  const size_t body = bytes.size() - 4;
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) stored |= uint32_t{static_cast<unsigned char>(bytes[body + i])} << (8 * i);
  if (MaskCrc32c(Crc32c(std::string_view(bytes).substr(0, body))) != stored) {
    return DataLoss(where + ": damaged (CRC mismatch)");
  }
  const uint64_t json_size = GetU64(bytes.data() + kMagicSize);
  if (json_size > body - kMagicSize - 8) return DataLoss(where + ": damaged header");
  Checkpoint c;
  size_t offset = kMagicSize + 8 + json_size;
  try {
    const nlohmann::json header = nlohmann::json::parse(bytes.substr(kMagicSize + 8, json_size));
    c.step = header.at("step").get<int64_t>();
    c.epoch = header.at("epoch").get<int64_t>();
    c.batches_done = header.at("batches_done").get<int64_t>();
    if (header.contains("best_metric")) c.best_metric = header.at("best_metric").get<double>();
    for (const auto& t : header.at("tensors")) {
      const std::string name = t.at("name").get<std::string>();
      const auto count = t.at("count").get<uint64_t>();
      if (count > (body - offset) / sizeof(float)) return DataLoss(where + ": damaged tensor sizes");
      std::vector<float> values(count);
      std::memcpy(values.data(), bytes.data() + offset, count * sizeof(float));
      offset += count * sizeof(float);
      const size_t colon = name.find(':');
      const std::string kind = name.substr(0, colon), weight = name.substr(colon + 1);
      if (kind == "weight") {
        c.weights[weight] = std::move(values);
      } else if (kind == "best") {
        c.best_weights[weight] = std::move(values);
      } else if (kind.starts_with("state")) {
        c.optimizer_state[weight].push_back(std::move(values));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(where + ": damaged header (" + e.what() + ")");
  }
  if (offset != body) return DataLoss(where + ": damaged tensor sizes");
  return c;
}

}  // namespace lockstep::training

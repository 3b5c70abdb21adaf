// A fresh directory under the system temp dir, named after the running test and removed with
// everything in it at scope exit. Shared by every test that writes files.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

namespace lockstep::test {

class ScratchDir {
 public:
  ScratchDir() {
    std::random_device rd;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "lockstep-";
    if (info != nullptr) name += std::string(info->test_suite_name()) + "-" + info->name() + "-";
    path_ = std::filesystem::temp_directory_path() / (name + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& rel) const { return path_ / rel; }

 private:
  std::filesystem::path path_;
};

}  // namespace lockstep::test

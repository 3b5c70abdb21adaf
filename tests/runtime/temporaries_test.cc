// The bundle writers' temporaries (runtime/bundle/temporaries.h): a writer locks its own for its
// life; one that is unlocked and a minute old is stale and goes at the next write, one that a
// live writer holds (or a young one) stays; a writer killed mid-export leaves a temporary that
// its death unlocks.
#include "runtime/bundle/temporaries.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "runtime/bundle/bundle.h"
#include "tests/runtime/bundle_test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using namespace testing_util;

// Makes `dir` look untouched for two minutes.
void Age(const fs::path& dir) {
  fs::last_write_time(dir, fs::file_time_type::clock::now() - std::chrono::minutes(2));
}

TEST(TemporariesTest, OnlyUnlockedOldOnesAreStale) {
  ScratchDir tmp;
  fs::create_directories(tmp / ".tmp-1-dead");  // a writer that died
  std::ofstream(tmp / ".tmp-1-dead" / "weights.bin") << "half";
  Age(tmp / ".tmp-1-dead");
  StatusOr<LockedTemporaryDir> live = LockedTemporaryDir::Create(tmp / ".tmp-2-live");  // a slow writer
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  Age(tmp / ".tmp-2-live");
  fs::create_directories(tmp / ".tmp-3-young");  // a writer that has only just begun
  std::ofstream(tmp / ".tmp-file") << "not a directory";
  fs::create_directories(tmp / "1");
  Age(tmp / "1");

  const std::vector<fs::path> stale = FindStaleTemporaries(tmp.path());
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0].filename(), ".tmp-1-dead");
  EXPECT_EQ(RemoveStaleTemporaries(tmp.path()), 1);
  EXPECT_FALSE(fs::exists(tmp / ".tmp-1-dead"));
  for (const char* kept : {".tmp-2-live", ".tmp-3-young", ".tmp-file", "1"}) EXPECT_TRUE(fs::exists(tmp / kept)) << kept;
  // The live writer finishes (or fails) and lets go: its temporary is stale if it is left.
  *live = LockedTemporaryDir::Create(tmp / ".tmp-4-other").value();
  EXPECT_EQ(FindStaleTemporaries(tmp.path()).size(), 1u);
}

// A bundle written into a directory removes the stale temporaries there first.
TEST(TemporariesTest, WritingABundleRemovesWhatDeadWritersLeft) {
  ScratchDir tmp;
  fs::create_directories(tmp / ".tmp-1-abc");
  Age(tmp / ".tmp-1-abc");
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "2").ok());
  EXPECT_FALSE(fs::exists(tmp / ".tmp-1-abc"));
  EXPECT_TRUE(fs::exists(tmp / "2"));
  EXPECT_TRUE(FindStaleTemporaries(tmp.path(), std::chrono::seconds(0)).empty()) << "the writer's own is gone";
}

// A writer killed with SIGKILL holds its lock until it dies, and not after.
TEST(TemporariesTest, AKilledWritersTemporaryBecomesStale) {
  ScratchDir tmp;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    StatusOr<LockedTemporaryDir> dir = LockedTemporaryDir::Create(tmp / ".tmp-1-writer");
    const char byte = dir.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &byte, 1);
    ::pause();
    ::_exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 'y');
  Age(tmp / ".tmp-1-writer");
  EXPECT_TRUE(FindStaleTemporaries(tmp.path()).empty()) << "a live writer's temporary";
  ::kill(writer, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(writer, &status, 0), writer);
  EXPECT_EQ(FindStaleTemporaries(tmp.path()).size(), 1u);
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
}  // namespace lockstep

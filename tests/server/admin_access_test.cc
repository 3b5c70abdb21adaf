// Admin access: loopback peers only by default (not web pages); with a token, the token from
// anyone and nothing without it.
#include "server/admin_access.h"

#include <gtest/gtest.h>

#include "tests/common/file_util.h"
#include "tests/common/scratch_dir.h"

namespace lockstep {
namespace {

TEST(AdminAccessTest, LocalPeers) {
  EXPECT_TRUE(IsLocalPeer("ipv4:127.0.0.1:5000"));
  EXPECT_TRUE(IsLocalPeer("ipv4:127.8.9.10:5000"));
  EXPECT_TRUE(IsLocalPeer("ipv6:[::1]:5000"));
  EXPECT_TRUE(IsLocalPeer("ipv6:[::ffff:127.0.0.1]:5000"));
  EXPECT_TRUE(IsLocalPeer("unix:/run/model-server.sock"));
  EXPECT_FALSE(IsLocalPeer("ipv4:10.0.0.5:5000"));
  EXPECT_FALSE(IsLocalPeer("ipv4:1.127.0.0:5000"));
  EXPECT_FALSE(IsLocalPeer("ipv6:[::ffff:10.0.0.1]:5000"));
  EXPECT_FALSE(IsLocalPeer("ipv6:[2001:db8::1]:5000"));
  EXPECT_FALSE(IsLocalPeer(""));
}

TEST(AdminAccessTest, LoopbackOnlyByDefault) {
  const AdminAccess access;
  EXPECT_TRUE(access.Check("Reload", "ipv4:127.0.0.1:1", "").ok());
  const Status remote = access.Check("Reload", "ipv4:10.0.0.5:1", "Bearer anything");
  EXPECT_EQ(remote.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(
      remote.message(),
      "Reload is allowed from loopback only (or with --admin_token_file); refused from ipv4:10.0.0.5:1");
}

TEST(AdminAccessTest, APageInTheHostsBrowserIsNotTheHost) {
  const AdminAccess access;
  const Status page = access.Check("RepositoryModelUnload", "ipv4:127.0.0.1:1", "", "https://example.com");
  EXPECT_EQ(page.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(page.message(),
            "RepositoryModelUnload is refused from a web page (Origin: https://example.com) unless the server has "
            "--admin_token_file");
}

TEST(AdminAccessTest, ATokenIsThePolicy) {
  test::ScratchDir dir;
  test::WriteFile(dir.path() / "token", "  s3cret-token\n");
  StatusOr<AdminAccess> access = AdminAccess::WithTokenFile((dir.path() / "token").string());
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  EXPECT_TRUE(access->Check("Reload", "ipv4:10.0.0.5:1", "Bearer s3cret-token").ok());
  // A page that has the token (the operator's own console) may use it.
  EXPECT_TRUE(access->Check("Reload", "ipv4:10.0.0.5:1", "Bearer s3cret-token", "https://console").ok());
  for (const char* wrong : {"", "Bearer", "Bearer ", "Bearer s3cret-toke", "Bearer s3cret-token2",
                            "bearer s3cret-token", "s3cret-token"}) {
    EXPECT_EQ(access->Check("Reload", "ipv4:127.0.0.1:1", wrong).code(), StatusCode::kUnauthenticated)
        << wrong;
  }
  test::WriteFile(dir.path() / "empty", " \n");
  EXPECT_EQ(AdminAccess::WithTokenFile((dir.path() / "empty").string()).status().message(),
            "--admin_token_file: '" + (dir.path() / "empty").string() + "' holds no token");
  EXPECT_FALSE(AdminAccess::WithTokenFile((dir.path() / "missing").string()).ok());
}

}  // namespace
}  // namespace lockstep

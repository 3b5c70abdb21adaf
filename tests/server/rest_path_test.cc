// REST paths as TF Serving matches them: case-insensitive, URL-decoded names and labels,
// digit versions, and its error messages for the malformed rest.
#include <gtest/gtest.h>

#include "server/rest_api.h"
#include "server/status_mapping.h"

namespace lockstep {
namespace {

TEST(RestPathTest, ParsesEveryForm) {
  StatusOr<RestPath> p = ParseRestPath("GET", "/v1/models/half");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->kind, RestPath::Kind::kStatus);
  EXPECT_EQ(p->model, "half");
  EXPECT_FALSE(p->version);
  EXPECT_FALSE(p->label);

  EXPECT_EQ(ParseRestPath("GET", "/v1/models/half/versions/9223372036854775807")->version, INT64_MAX);

  p = ParseRestPath("GET", "/v1/models/half/versions/42/metadata");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, RestPath::Kind::kMetadata);
  EXPECT_EQ(p->version, 42);

  p = ParseRestPath("POST", "/v1/models/half/labels/canary:predict");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, RestPath::Kind::kPredict);
  EXPECT_EQ(p->label, "canary");

  EXPECT_EQ(ParseRestPath("POST", "/v1/models/half:classify")->kind, RestPath::Kind::kClassify);
  EXPECT_EQ(ParseRestPath("POST", "/v1/models/half:regress")->kind, RestPath::Kind::kRegress);
}

TEST(RestPathTest, MatchesCaseInsensitivelyAndDecodesNames) {
  StatusOr<RestPath> p = ParseRestPath("POST", "/V1/Models/my%20model/Versions/7:PREDICT?x=1");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->model, "my model");
  EXPECT_EQ(p->version, 7);
  EXPECT_EQ(p->kind, RestPath::Kind::kPredict);
  EXPECT_EQ(ParseRestPath("GET", "/v1/models/m/labels/a%2Fb")->label, "a/b");
}

TEST(RestPathTest, RejectsWithTfServingMessages) {
  StatusOr<RestPath> p = ParseRestPath("GET", "/v1/models");
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "Missing model name in request.");
  EXPECT_EQ(ParseRestPath("GET", "/v1/models/").status().message(), "Missing model name in request.");

  p = ParseRestPath("GET", "/v1/models/m/versions/abc");
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "Malformed request: GET /v1/models/m/versions/abc");

  p = ParseRestPath("POST", "/v1/models/m/versions/1/labels/x:predict");
  EXPECT_EQ(p.status().message(), "Both model version (1) and model version label (x) cannot be supplied.");

  EXPECT_EQ(ParseRestPath("GET", "/v2/models/m").status().code(), StatusCode::kNotFound);
  for (const char* bad : {"/v1/models/m:predict", "/v1/models/m/metadata/x", "/v1/modelsx/m", "/v1/models/m/versions/",
                          "/v1/models/m/versions/92233720368547758070", "/v1/models/m/versions/-1", "/v1/models/m%zz"}) {
    EXPECT_EQ(ParseRestPath("GET", bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  for (const char* bad : {"/v1/models/m", "/v1/models/m:explain", "/v1/models/m/metadata"}) {
    EXPECT_EQ(ParseRestPath("POST", bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ParseRestPath("PUT", "/v1/models/m").status().code(), StatusCode::kInvalidArgument);
}

TEST(StatusMappingTest, FollowsTfServing) {
  EXPECT_EQ(HttpStatusFor(StatusCode::kOk), 200);
  EXPECT_EQ(HttpStatusFor(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kFailedPrecondition), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kOutOfRange), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusFor(StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(StatusCode::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusFor(StatusCode::kAborted), 409);
  EXPECT_EQ(HttpStatusFor(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(StatusCode::kCancelled), 499);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnknown), 500);
  EXPECT_EQ(HttpStatusFor(StatusCode::kInternal), 500);
  EXPECT_EQ(HttpStatusFor(StatusCode::kDataLoss), 500);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnimplemented), 501);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(StatusCode::kDeadlineExceeded), 504);
}

}  // namespace
}  // namespace lockstep

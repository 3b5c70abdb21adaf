// The REST API's GET paths end to end: model status (versions, labels, failed versions),
// path parsing and URL decoding, and model metadata, against the shared RestApiTest server.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "tests/e2e/rest_test_util.h"

namespace lockstep::e2e {
namespace {

// model_version_status sorted by version: the order is not part of the API.
json SortedVersions(json status) {
  json list = status.at("model_version_status");
  std::sort(list.begin(), list.end(), [](const json& a, const json& b) {
    return std::stoll(a.at("version").get<std::string>()) < std::stoll(b.at("version").get<std::string>());
  });
  return list;
}

// ---- GET status ----

TEST_F(RestApiTest, StatusOfTheOnlyVersionIsExactlyTfServingsJson) {
  const HttpResult r = Get("/v1/models/half_plus_two");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("1")})}}));
  // Status requests are served by no particular version.
  EXPECT_EQ(r.headers.count("x-model-version"), 0u);
  // No CORS headers unless asked for.
  EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
}

TEST_F(RestApiTest, StatusListsAllVersions) {
  const HttpResult r = Get("/v1/models/versioned");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  const json body = ParseBody(r);
  ASSERT_EQ(body.size(), 1u) << r.body;
  EXPECT_EQ(SortedVersions(body), json::array({OkStatus("1"), OkStatus("2"), OkStatus("3")}));
}

TEST_F(RestApiTest, StatusOfOneVersion) {
  const HttpResult r = Get("/v1/models/versioned/versions/2");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("2")})}}));
}

TEST_F(RestApiTest, StatusByLabel) {
  HttpResult r = Get("/v1/models/versioned/labels/stable");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("1")})}}));
  r = Get("/v1/models/versioned/labels/canary");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("2")})}}));
  // Labels are URL-decoded.
  r = Get("/v1/models/versioned/labels/pre%20release");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("3")})}}));
}

TEST_F(RestApiTest, StatusOfAFailedVersionCarriesItsError) {
  const HttpResult r = Get("/v1/models/broken");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  const json body = ParseBody(r);
  ASSERT_EQ(body.at("model_version_status").size(), 1u) << r.body;
  const json& v = body["model_version_status"][0];
  EXPECT_EQ(v.at("version"), "1");
  EXPECT_EQ(v.at("state"), "END");
  ASSERT_TRUE(v.at("status").at("error_code").is_string()) << r.body;
  EXPECT_NE(v["status"]["error_code"], "OK") << r.body;
  EXPECT_FALSE(v["status"].at("error_message").get<std::string>().empty()) << r.body;
  // And nothing serves it.
  EXPECT_REST_ERROR(Post("/v1/models/broken:predict", R"({"instances": [1.0]})"), 404,
                    "Servable not found for request: Latest(broken)");
}

TEST_F(RestApiTest, StatusOfUnknownModelVersionOrLabelIs404) {
  EXPECT_REST_ERROR(Get("/v1/models/nope"), 404, "Could not find any versions of model nope");
  EXPECT_REST_ERROR(Get("/v1/models/versioned/versions/9"), 404, "Could not find version 9 of model versioned");
  EXPECT_REST_ERROR(Get("/v1/models/versioned/labels/nope"), 404, "Unrecognized servable version label: nope");
  EXPECT_REST_ERROR(Get("/v1/models/nope/labels/stable"), 404, "Unrecognized servable version label: stable");
}

TEST_F(RestApiTest, MissingModelNameIs400) {
  EXPECT_REST_ERROR(Get("/v1/models"), 400, "Missing model name in request.");
  EXPECT_REST_ERROR(Get("/v1/models/"), 400, "Missing model name in request.");
  EXPECT_REST_ERROR(Post("/v1/models:predict", R"({"instances": [1.0]})"), 400, "Malformed request");
}

TEST_F(RestApiTest, VersionAndLabelTogetherAre400) {
  const std::string message = "Both model version (1) and model version label (stable) cannot be supplied.";
  EXPECT_REST_ERROR(Get("/v1/models/versioned/versions/1/labels/stable"), 400, message);
  EXPECT_REST_ERROR(Get("/v1/models/versioned/versions/1/labels/stable/metadata"), 400, message);
  EXPECT_REST_ERROR(Post("/v1/models/versioned/versions/1/labels/stable:predict", R"({"instances": [1.0]})"), 400,
                    message);
}

TEST_F(RestApiTest, MalformedPathsAre400) {
  for (const std::string target :
       {"/v1/models/versioned/versions/abc", "/v1/models/versioned/versions/-1", "/v1/models/versioned/versions/1a",
        "/v1/models/versioned/versions/", "/v1/models/versioned/labels/", "/v1/models/versioned/bogus",
        "/v1/models/versioned/metadata/extra", "/v1/models/half_plus_two:predict"}) {
    SCOPED_TRACE(target);
    EXPECT_REST_ERROR(Get(target), 400, "Malformed request");
  }
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two:explain", "{}"), 400, "Malformed request");
  EXPECT_REST_ERROR(Post("/v1/models/half_plus_two/versions/x:predict", R"({"instances": [1.0]})"), 400,
                    "Malformed request");
  // Outside /v1/ and /v2 (the Open Inference Protocol's) nothing is served.
  const HttpResult outside = Get("/v3/models/half_plus_two");
  EXPECT_EQ(outside.status, 404) << outside.body;
}

TEST_F(RestApiTest, PathsMatchCaseInsensitively) {
  HttpResult r = Get("/V1/MODELS/versioned/VERSIONS/2");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("2")})}}));
  r = Get("/v1/Models/versioned/Labels/canary/METADATA");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r).at("model_spec").at("version"), "2");
  r = Post("/V1/models/half_plus_two:PREDICT", R"({"instances": [1.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5]})");
  r = Post("/v1/MODELS/half_plus_two:Regress", R"({"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  // The model name itself is not a path keyword: it is matched as written.
  EXPECT_REST_ERROR(Get("/v1/models/HALF_PLUS_TWO"), 404, "HALF_PLUS_TWO");
}

TEST_F(RestApiTest, ModelNameIsUrlDecoded) {
  HttpResult r = Get("/v1/models/half%20plus%20two");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r), json({{"model_version_status", json::array({OkStatus("1")})}}));
  r = Post("/v1/models/half%20plus%20two:predict", R"({"instances": [1.0, 2.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0]})");
  r = Get("/v1/models/half%20plus%20two/metadata");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r).at("model_spec").at("name"), "half plus two");
  // Lower-case hex too; a broken escape is a malformed path.
  EXPECT_EQ(Get("/v1/models/half_plus%5ftwo").status, 200);
  EXPECT_REST_ERROR(Get("/v1/models/half%2"), 400, "Malformed request");
  EXPECT_REST_ERROR(Get("/v1/models/half%zztwo"), 400, "Malformed request");
}

TEST_F(RestApiTest, QueryStringIsIgnored) {
  const HttpResult r = Post("/v1/models/half_plus_two:predict?debug=1", R"({"instances": [1.0]})");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5]})");
}

// ---- GET metadata ----

TEST_F(RestApiTest, MetadataHasTheThreeSignaturesOfHalfPlusTwo) {
  const HttpResult r = Get("/v1/models/half_plus_two/metadata");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  const json body = ParseBody(r);
  ASSERT_EQ(body.size(), 2u) << r.body;
  EXPECT_EQ(body.at("model_spec"), json({{"name", "half_plus_two"}, {"signature_name", ""}, {"version", "1"}}));
  const json& metadata = body.at("metadata");
  ASSERT_EQ(metadata.size(), 1u) << r.body;
  // The double nesting is TF Serving's: metadata.signature_def is a SignatureDefMap.
  const json& signatures = metadata.at("signature_def").at("signature_def");
  std::set<std::string> names;
  for (const auto& [name, def] : signatures.items()) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"serving_default", "regress_x_to_y", "classify_x_to_y"}));

  const json vector_shape = {{"dim", json::array({{{"size", "-1"}, {"name", ""}}})}, {"unknown_rank", false}};
  const auto check_info = [&](const json& info, const json& shape) {
    EXPECT_EQ(info.at("dtype"), "DT_FLOAT") << info;
    EXPECT_EQ(info.at("tensor_shape"), shape) << info;
    EXPECT_TRUE(info.at("name").is_string()) << info;
  };
  const json& predict = signatures.at("serving_default");
  EXPECT_EQ(predict.at("method_name"), "tensorflow/serving/predict");
  ASSERT_EQ(predict.at("inputs").size(), 1u);
  check_info(predict["inputs"].at("x"), vector_shape);
  ASSERT_EQ(predict.at("outputs").size(), 1u);
  check_info(predict["outputs"].at("y"), vector_shape);

  const json& regress = signatures.at("regress_x_to_y");
  EXPECT_EQ(regress.at("method_name"), "tensorflow/serving/regress");
  check_info(regress.at("inputs").at("x"), vector_shape);
  check_info(regress.at("outputs").at("outputs"), vector_shape);

  const json& classify = signatures.at("classify_x_to_y");
  EXPECT_EQ(classify.at("method_name"), "tensorflow/serving/classify");
  check_info(classify.at("inputs").at("x"), vector_shape);
  const json matrix_shape = {{"dim", json::array({{{"size", "-1"}, {"name", ""}}, {{"size", "1"}, {"name", ""}}})},
                             {"unknown_rank", false}};
  check_info(classify.at("outputs").at("scores"), matrix_shape);
}

TEST_F(RestApiTest, MetadataOfAVersionOrLabel) {
  HttpResult r = Get("/v1/models/versioned/versions/3/metadata");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r).at("model_spec").at("version"), "3");
  r = Get("/v1/models/versioned/labels/stable/metadata");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r).at("model_spec").at("version"), "1");
  r = Get("/v1/models/versioned/metadata");  // latest
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(ParseBody(r).at("model_spec").at("version"), "3");

  EXPECT_REST_ERROR(Get("/v1/models/nope/metadata"), 404, "Servable not found for request: Latest(nope)");
  EXPECT_REST_ERROR(Get("/v1/models/versioned/versions/7/metadata"), 404,
                    "Servable not found for request: Specific(versioned, 7)");
  EXPECT_REST_ERROR(Get("/v1/models/versioned/labels/nope/metadata"), 404,
                    "Unrecognized servable version label: nope");
}

TEST_F(RestApiTest, MetadataOfSeveralInputsAndStrings) {
  const HttpResult r = Get("/v1/models/multi/metadata");
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  const json signatures = ParseBody(r).at("metadata").at("signature_def").at("signature_def");
  const json& predict = signatures.at("serving_default");
  EXPECT_EQ(predict.at("inputs").size(), 2u);
  EXPECT_EQ(predict.at("inputs").at("b").at("dtype"), "DT_FLOAT");
  EXPECT_EQ(predict.at("outputs").size(), 2u);
  EXPECT_TRUE(predict.at("outputs").contains("product"));
  EXPECT_EQ(signatures.at("echo").at("inputs").at("text").at("dtype"), "DT_STRING");
}

}  // namespace
}  // namespace lockstep::e2e

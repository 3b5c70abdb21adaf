#include "server/open_inference/rest_paths.h"

#include <nlohmann/json.hpp>

#include "runtime/tensor_json.h"
#include "server/rest_api.h"

namespace lockstep::open_inference {

using nlohmann::json;

namespace {

// The next segment of `rest` (which starts after a '/'), up to the next '/'.
std::string_view TakeSegment(std::string_view* rest) {
  const size_t end = rest->find('/');
  const std::string_view segment = rest->substr(0, end);
  rest->remove_prefix(end == std::string_view::npos ? rest->size() : end + 1);
  return segment;
}

// The value of `key` in a query string ("a=1&b=2"), URL-decoded; empty when absent.
bool QueryValue(std::string_view query, std::string_view key, std::string* out) {
  out->clear();
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query.remove_prefix(amp == std::string_view::npos ? query.size() : amp + 1);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key) return eq == std::string_view::npos || UrlDecodeInto(pair.substr(eq + 1), out);
  }
  return true;
}

Status WrongMethod(std::string_view method, std::string_view path, std::string_view allowed) {
  return InvalidArgument("Malformed request: " + std::string(method) + " " + std::string(path) + " (use " +
                         std::string(allowed) + ")");
}

template <typename Repeated>
json List(const Repeated& values) {
  json list = json::array();
  for (const auto& v : values) list.push_back(v);
  return list;
}

json ToJson(const google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>& tensors) {
  json list = json::array();
  for (const auto& t : tensors) {
    list.push_back({{"name", t.name()}, {"datatype", t.datatype()}, {"shape", List(t.shape())}});
  }
  return list;
}

json Duration(const inference::StatisticDuration& d) { return {{"count", d.count()}, {"ns", d.ns()}}; }

std::string Dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

bool IsV2Target(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  return path == "/v2" || path.starts_with("/v2/");
}

Status ParseRestPath(std::string_view method, std::string_view target, RestPath* out) {
  const size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  const std::string_view query = question == std::string_view::npos ? std::string_view() : target.substr(question + 1);
  const bool get = method == "GET", post = method == "POST";
  auto unknown = [&] { return NotFound("Unknown path: " + std::string(path)); };
  out->model.clear();
  out->version.clear();
  out->signature_name.clear();
  if (path == "/v2") {
    if (!get) return WrongMethod(method, path, "GET");
    out->kind = RestPath::Kind::kServer;
    return Status::Ok();
  }
  std::string_view rest = path.substr(4);  // after "/v2/"
  const std::string_view first = TakeSegment(&rest);
  if (first == "health") {
    if (rest != "live" && rest != "ready") return unknown();
    if (!get) return WrongMethod(method, path, "GET");
    out->kind = RestPath::Kind::kHealth;
    return Status::Ok();
  }
  if (first == "repository") {
    const std::string_view second = TakeSegment(&rest);
    if (second == "index" && rest.empty()) {
      if (!post) return WrongMethod(method, path, "POST");
      out->kind = RestPath::Kind::kIndex;
      return Status::Ok();
    }
    if (second != "models") return unknown();
    if (!UrlDecodeInto(TakeSegment(&rest), &out->model) || out->model.empty()) {
      return InvalidArgument("Malformed request: bad model name in " + std::string(path));
    }
    if (rest == "load") {
      out->kind = RestPath::Kind::kLoad;
    } else if (rest == "unload") {
      out->kind = RestPath::Kind::kUnload;
    } else {
      return unknown();
    }
    return post ? Status::Ok() : WrongMethod(method, path, "POST");
  }
  if (first != "models") return unknown();
  if (rest == "stats") {  // every model's statistics
    if (!get) return WrongMethod(method, path, "GET");
    out->kind = RestPath::Kind::kStatistics;
    return Status::Ok();
  }
  if (!UrlDecodeInto(TakeSegment(&rest), &out->model) || out->model.empty()) {
    return InvalidArgument("Malformed request: bad model name in " + std::string(path));
  }
  if (rest.starts_with("versions/")) {
    rest.remove_prefix(9);
    if (!UrlDecodeInto(TakeSegment(&rest), &out->version) || out->version.empty()) {
      return InvalidArgument("Malformed request: bad model version in " + std::string(path));
    }
  }
  if (rest.empty()) {
    if (!get) return WrongMethod(method, path, "GET");
    out->kind = RestPath::Kind::kMetadata;
    if (!QueryValue(query, "signature_name", &out->signature_name)) {
      return InvalidArgument("Malformed request: bad signature_name in " + std::string(target));
    }
    return Status::Ok();
  }
  if (rest == "ready") {
    if (!get) return WrongMethod(method, path, "GET");
    out->kind = RestPath::Kind::kModelReady;
  } else if (rest == "infer") {
    if (!post) return WrongMethod(method, path, "POST");
    out->kind = RestPath::Kind::kInfer;
  } else if (rest == "stats") {
    if (!get) return WrongMethod(method, path, "GET");
    out->kind = RestPath::Kind::kStatistics;
  } else {
    return unknown();
  }
  return Status::Ok();
}

std::string ServerMetadataJson(const inference::ServerMetadataResponse& response) {
  return Dump({{"name", response.name()},
               {"version", response.version()},
               {"extensions", List(response.extensions())}});
}

std::string ModelMetadataJson(const inference::ModelMetadataResponse& response) {
  return Dump({{"name", response.name()},
               {"versions", List(response.versions())},
               {"platform", response.platform()},
               {"inputs", ToJson(response.inputs())},
               {"outputs", ToJson(response.outputs())}});
}

std::string RepositoryIndexJson(const inference::RepositoryIndexResponse& response) {
  json list = json::array();
  for (const auto& m : response.models()) {
    json entry = {{"name", m.name()}, {"state", m.state()}};
    if (!m.version().empty()) entry["version"] = m.version();
    if (!m.reason().empty()) entry["reason"] = m.reason();
    list.push_back(std::move(entry));
  }
  return Dump(list);
}

std::string ModelStatisticsJson(const inference::ModelStatisticsResponse& response) {
  json list = json::array();
  for (const auto& s : response.model_stats()) {
    const inference::InferStatistics& i = s.inference_stats();
    list.push_back({{"name", s.name()},
                    {"version", s.version()},
                    {"last_inference", s.last_inference()},
                    {"inference_count", s.inference_count()},
                    {"execution_count", s.execution_count()},
                    {"inference_stats",
                     {{"success", Duration(i.success())},
                      {"fail", Duration(i.fail())},
                      {"queue", Duration(i.queue())},
                      {"compute_input", Duration(i.compute_input())},
                      {"compute_infer", Duration(i.compute_infer())},
                      {"compute_output", Duration(i.compute_output())}}},
                    {"batch_stats", json::array()}});
  }
  return Dump({{"model_stats", list}});
}

StatusOr<bool> ParseRepositoryIndexBody(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return false;
  LS_ASSIGN_OR_RETURN(const json parsed, ParseJson(body, 8));
  if (!parsed.is_object()) return InvalidArgument("the repository index request must be a JSON object");
  const auto it = parsed.find("ready");
  if (it == parsed.end()) return false;
  if (!it->is_boolean()) return InvalidArgument("'ready' must be true or false");
  return it->get<bool>();
}

}  // namespace lockstep::open_inference

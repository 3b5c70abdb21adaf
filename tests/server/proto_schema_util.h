// What the schema tests (proto_schema_test.cc, open_inference_schema_test.cc) check a generated
// descriptor with: a message's fields (names, numbers, message types, oneofs; no others), their
// wire types and repeatedness, string-keyed maps, and a service's methods.
#pragma once

#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>

#include <string>
#include <vector>

namespace lockstep::schema_test {

namespace gp = google::protobuf;
using FD = gp::FieldDescriptor;

struct FieldSpec {
  const char* name;
  int number;
  // For message-typed fields (map values for maps): the full type name; "" to skip.
  const char* type = "";
  // The oneof the field belongs to; "" for none.
  const char* oneof = "";
};

// Checks the message's full name and every listed field, and that it has no other fields
// (an extra field would be a number upstream may use for something else).
inline void ExpectMessage(const gp::Descriptor* d, const std::string& full_name,
                   const std::vector<FieldSpec>& fields) {
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->full_name(), full_name);
  EXPECT_EQ(d->field_count(), static_cast<int>(fields.size())) << full_name;
  for (const FieldSpec& spec : fields) {
    const gp::FieldDescriptor* f = d->FindFieldByName(spec.name);
    ASSERT_NE(f, nullptr) << full_name << "." << spec.name;
    EXPECT_EQ(f->number(), spec.number) << full_name << "." << spec.name;
    if (*spec.type) {
      const gp::Descriptor* type = f->message_type();
      ASSERT_NE(type, nullptr) << full_name << "." << spec.name;
      if (f->is_map()) type = f->message_type()->map_value()->message_type();
      ASSERT_NE(type, nullptr) << full_name << "." << spec.name;
      EXPECT_EQ(type->full_name(), spec.type) << full_name << "." << spec.name;
    }
    const gp::OneofDescriptor* oneof = f->real_containing_oneof();
    EXPECT_EQ(oneof ? oneof->name() : std::string(), spec.oneof) << full_name << "." << spec.name;
  }
}

// ExpectMessage pins names, numbers, message types and oneofs; ExpectKinds pins each field's
// wire type and repeatedness (an int32 where upstream has uint32, or a lost `repeated`, still
// compiles and still parses wrong).
struct KindSpec {
  const char* name;
  FD::Type type;
  bool repeated = false;
};

inline void ExpectKinds(const gp::Descriptor* d, const std::vector<KindSpec>& fields) {
  ASSERT_NE(d, nullptr);
  for (const KindSpec& spec : fields) {
    const gp::FieldDescriptor* f = d->FindFieldByName(spec.name);
    ASSERT_NE(f, nullptr) << d->full_name() << "." << spec.name;
    EXPECT_EQ(f->type(), spec.type) << d->full_name() << "." << spec.name;
    EXPECT_EQ(f->is_repeated(), spec.repeated) << d->full_name() << "." << spec.name;
  }
}

// A map<string, V> field; ExpectMessage checks V.
inline void ExpectStringMap(const gp::Descriptor* d, const char* name) {
  const gp::FieldDescriptor* f = d->FindFieldByName(name);
  ASSERT_NE(f, nullptr) << d->full_name() << "." << name;
  ASSERT_TRUE(f->is_map()) << d->full_name() << "." << name;
  EXPECT_EQ(f->message_type()->map_key()->type(), FD::TYPE_STRING) << d->full_name() << "." << name;
}

struct MethodSpec {
  const char* name;
  const char* input;
  const char* output;
  bool client_streaming = false;
  bool server_streaming = false;
};

inline void ExpectService(const gp::ServiceDescriptor* s, const std::string& full_name,
                   const std::vector<MethodSpec>& methods) {
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->full_name(), full_name);
  ASSERT_EQ(s->method_count(), static_cast<int>(methods.size()));
  for (size_t i = 0; i < methods.size(); ++i) {
    const gp::MethodDescriptor* m = s->method(static_cast<int>(i));
    EXPECT_EQ(m->name(), methods[i].name);
    EXPECT_EQ(m->input_type()->full_name(), methods[i].input) << m->name();
    EXPECT_EQ(m->output_type()->full_name(), methods[i].output) << m->name();
    EXPECT_EQ(m->client_streaming(), methods[i].client_streaming) << m->name();
    EXPECT_EQ(m->server_streaming(), methods[i].server_streaming) << m->name();
  }
}

}  // namespace lockstep::schema_test

// model-server's request logs as training data (prediction_log_reader.h, data.format
// "prediction_log"): a Predict request's tensor rows and a Classify request's examples (with a
// context) become rows, labelled by request id and row from a CSV; unlabelled rows, labels for
// nothing, truncated records and other log types are counted, not trained on; with the
// original data the logged rows join its rows under its features and class names.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "runtime/tfrecord.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"
#include "tests/common/scratch_dir.h"
#include "training/config.h"
#include "training/data/dataset.h"
#include "training/data/prediction_log_reader.h"

namespace lockstep::training {
namespace {

namespace tfs = tensorflow::serving;

tfs::PredictionLog PredictLog(const std::string& id, const std::vector<std::vector<float>>& rows,
                              const std::string& input = "x") {
  tfs::PredictionLog log;
  log.mutable_log_metadata()->mutable_model_spec()->set_name("m");
  log.mutable_log_metadata()->set_request_id(id);
  tensorflow::TensorProto& x = (*log.mutable_predict_log()->mutable_request()->mutable_inputs())[input];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(rows.size()));
  x.mutable_tensor_shape()->add_dim()->set_size(static_cast<int64_t>(rows[0].size()));
  for (const auto& row : rows) {
    for (float v : row) x.add_float_val(v);
  }
  return log;
}

void Write(const std::filesystem::path& path, const std::vector<tfs::PredictionLog>& logs) {
  StatusOr<TfRecordWriter> writer = TfRecordWriter::Create(path.string());
  ASSERT_TRUE(writer.ok());
  for (const auto& log : logs) ASSERT_TRUE(writer->Write(log.SerializeAsString()).ok());
  ASSERT_TRUE(writer->Flush().ok());
}

void WriteText(const std::filesystem::path& path, const std::string& text) { std::ofstream(path) << text; }

TEST(PredictionLogReaderTest, PredictRowsAreLabelledByRequestIdAndRow) {
  ::lockstep::test::ScratchDir dir;
  tfs::PredictionLog truncated = PredictLog("r-t", {{9, 9}});
  truncated.mutable_log_metadata()->set_truncated(true);
  tfs::PredictionLog other;  // no request a row can come from
  other.mutable_log_metadata()->set_request_id("r-o");
  tfs::PredictionLog ints = PredictLog("r-3", {{0, 0}});
  tensorflow::TensorProto& x = (*ints.mutable_predict_log()->mutable_request()->mutable_inputs())["x"];
  x.clear_float_val();
  x.set_dtype(tensorflow::DT_INT64);
  x.add_int64_val(7);
  x.add_int64_val(8);
  Write(dir / "a.tfrecord", {PredictLog("r-1", {{1, 2}, {3, 4}}), truncated, other});
  Write(dir / "b.tfrecord", {PredictLog("r-2", {{5, 6}}), ints, PredictLog("r-2", {{50, 60}})});  // r-2 retried
  WriteText(dir / "labels.csv", "request_id,row,label\nr-1,1,cat\nr-2,0,dog\nr-3,0,cat\nr-9,0,dog\n");

  PredictionLogOptions options;
  options.labels_path = (dir / "labels.csv").string();
  const std::vector<std::string> files = {(dir / "a.tfrecord").string(), (dir / "b.tfrecord").string()};
  StatusOr<PredictionLogRows> read = ReadPredictionLogs(files, options);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->records, 6);
  EXPECT_EQ(read->passed_over, 2);
  EXPECT_EQ(read->instances, 5);
  EXPECT_EQ(read->duplicates, 1);        // the retry's row: r-2 is labelled once, by its first
  EXPECT_EQ(read->unlabeled, 1);         // r-1's row 0
  EXPECT_EQ(read->unmatched_labels, 1);  // r-9
  const LabelledTable& t = read->table;
  EXPECT_EQ(t.feature_names, (std::vector<std::string>{"x[0]", "x[1]"}));
  EXPECT_EQ(t.features, (std::vector<float>{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(t.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(t.labels, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_NE(t.Where(1).find("b.tfrecord: record at offset"), std::string::npos) << t.Where(1);

  // A value that is not finite: refused, as in a CSV.
  Write(dir / "nan.tfrecord", {PredictLog("r-1", {{1, std::nanf("")}})});
  StatusOr<PredictionLogRows> nan = ReadPredictionLogs(std::vector<std::string>{(dir / "nan.tfrecord").string()}, options);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("input 'x': value 1 is not finite"), std::string::npos) << nan.status().message();

  // Named features of another width: refused, naming the file and the record.
  options.feature_names = {"a", "b", "c"};
  options.feature_keys = {{"a", 1}, {"b", 1}, {"c", 1}};
  read = ReadPredictionLogs(files, options);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("a.tfrecord: record at offset 0: input 'x' has 2 values a row, the features are 3"),
            std::string::npos)
      << read.status().message();
}

TEST(PredictionLogReaderTest, ClassifyExamplesTakeTheirContext) {
  ::lockstep::test::ScratchDir dir;
  tfs::PredictionLog log;
  log.mutable_log_metadata()->set_request_id("c-1");
  auto* with_context =
      log.mutable_classify_log()->mutable_request()->mutable_input()->mutable_example_list_with_context();
  (*with_context->mutable_context()->mutable_features()->mutable_feature())["age"].mutable_int64_list()->add_value(40);
  for (float bmi : {21.5f, 30.0f}) {
    auto& f = *with_context->add_examples()->mutable_features()->mutable_feature();
    f["bmi"].mutable_float_list()->add_value(bmi);
  }
  // The second example's own age wins over the context's.
  (*with_context->mutable_examples(1)->mutable_features()->mutable_feature())["age"].mutable_int64_list()->add_value(50);
  Write(dir / "c.tfrecord", {log});
  WriteText(dir / "labels.csv", "request_id,row,label\nc-1,0,1\nc-1,1,0\n");
  PredictionLogOptions options;
  options.labels_path = (dir / "labels.csv").string();
  options.feature_keys = {{"age", 1}, {"bmi", 1}};
  options.feature_names = {"age", "bmi"};
  StatusOr<PredictionLogRows> read = ReadPredictionLogs(std::vector<std::string>{(dir / "c.tfrecord").string()}, options);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->table.features, (std::vector<float>{40, 21.5f, 50, 30}));
  EXPECT_EQ(read->table.labels, (std::vector<int32_t>{1, 0}));
  EXPECT_TRUE(read->table.class_names.empty());  // integer ids
}

TEST(PredictionLogReaderTest, BadLabelFilesAreClearErrors) {
  ::lockstep::test::ScratchDir dir;
  Write(dir / "a.tfrecord", {PredictLog("r-1", {{1, 2}})});
  PredictionLogOptions options;
  options.labels_path = (dir / "labels.csv").string();
  const std::vector<std::string> files = {(dir / "a.tfrecord").string()};
  for (const auto& [text, error] : std::vector<std::pair<std::string, std::string>>{
           {"id,label\nr-1,0\n", "labels.csv:1: no 'request_id' column"},
           {"request_id,class\nr-1,0\n", "labels.csv:1: no 'label' column (data.label)"},
           {"request_id,label\nr-1,0\nr-1,1\n", "labels.csv:3: request r-1 row 0 is labelled already, on line 2"},
           {"request_id,row,label\nr-1,-1,0\n", "labels.csv:2: column 'row': '-1' is not an instance index"},
           {"request_id,label\nr-1\n", "labels.csv:2: 1 fields, the header has 2"},
           {"request_id,label\nr-1,\n", "labels.csv:2: column 'label' is empty"}}) {
    WriteText(dir / "labels.csv", text);
    StatusOr<PredictionLogRows> read = ReadPredictionLogs(files, options);
    ASSERT_FALSE(read.ok()) << text;
    EXPECT_NE(read.status().message().find(error), std::string::npos) << read.status().message();
  }
  options.labels_path = (dir / "missing.csv").string();
  EXPECT_EQ(ReadPredictionLogs(files, options).status().code(), StatusCode::kNotFound);
}

// The dataset of a retraining: the original CSV's rows, then the labelled logged ones, under
// the CSV's feature names and class ids across both.
TEST(PredictionLogReaderTest, LogsJoinTheOriginalData) {
  ::lockstep::test::ScratchDir dir;
  WriteText(dir / "original.csv", "a,b,label\n1,1,cat\n2,2,cat\n3,3,dog\n4,4,dog\n");
  Write(dir / "logs.tfrecord", {PredictLog("r-1", {{5, 5}}), PredictLog("r-2", {{6, 6}}), PredictLog("r-3", {{7, 7}})});
  WriteText(dir / "labels.csv", "request_id,label\nr-1,bird\nr-3,cat\n");
  DataConfig data;
  data.format = "prediction_log";
  data.train = {(dir / "*.tfrecord").string()};
  data.labels = (dir / "labels.csv").string();
  data.original = {(dir / "original.csv").string()};
  data.test_fraction = 0;
  StatusOr<Dataset> d = LoadDataset(data);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const LabelledTable& t = *d->tables[0];
  EXPECT_EQ(t.feature_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(t.features, (std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 7, 7}));
  EXPECT_EQ(t.class_names, (std::vector<std::string>{"bird", "cat", "dog"}));
  EXPECT_EQ(t.labels, (std::vector<int32_t>{1, 1, 2, 2, 0, 1}));
  EXPECT_EQ(d->train.rows.size(), 6u);

  // Nothing labelled: an error that says what was there.
  WriteText(dir / "labels.csv", "request_id,label\nr-7,cat\n");
  d = LoadDataset(data);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("no logged row has a label (3 logged rows, 1 labels for none of them)"),
            std::string::npos)
      << d.status().message();
}

TEST(PredictionLogReaderTest, TheConfigNamesWhatPredictionLogDataNeeds) {
  const auto load = [](const std::string& data) {
    return ParseTrainConfig(R"({"data": )" + data + R"(, "model": {"layers": [{"type": "dense", "units": 2}]}})",
                            "c.json");
  };
  StatusOr<TrainConfig> c = load(R"({"format": "prediction_log", "train": "logs/*.tfrecord"})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("data.labels"), std::string::npos) << c.status().message();
  c = load(R"({"format": "csv", "train": "a.csv", "labels": "l.csv"})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("data.labels"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("prediction_log data only"), std::string::npos) << c.status().message();
  c = load(R"({"format": "prediction_log", "train": "l.tfrecord", "labels": "l.csv", "input": "x",
               "original": {"files": ["digits.csv"]}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->data.original, (std::vector<std::string>{"digits.csv"}));
  EXPECT_EQ(c->data.input, "x");
  StatusOr<TrainConfig> again = ParseTrainConfig(TrainConfigToJson(*c), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->data, c->data);
}

}  // namespace
}  // namespace lockstep::training

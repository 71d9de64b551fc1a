// The coordinator's Prometheus metrics (coordinator/metrics.h), scraped over
// HTTP as Prometheus would and parsed by a small reader of the text format:
// jobs by state and the queue as the job records say, finished steps' times
// as the jobs' own results say, workers' liveness, while jobs run and after
// a worker is lost; and each worker's own (worker/worker_metrics.h).
#include <map>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "services/http_server.h"
#include "tests/cluster/test_pod.h"
#include "tests/cluster/train_jobs.h"

namespace tpuemu {
namespace {

// Samples by their name and labels as written: `tpuemu_jobs{state="running"}`.
using Samples = std::map<std::string, double>;

// Reads the text exposition format strictly: every sample line is
// `name{labels} value`, every family has HELP and TYPE before its samples.
Samples Parse(const std::string& text) {
  Samples samples;
  std::map<std::string, std::string> types;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, type;
      words >> name >> type;
      EXPECT_THAT(type, ::testing::AnyOf("gauge", "counter", "histogram")) << line;
      types[name] = type;
      continue;
    }
    const size_t space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    const std::string key = line.substr(0, space);
    const std::string name = key.substr(0, key.find('{'));
    const bool known = types.contains(name) || types.contains(name.substr(0, name.rfind('_')));
    EXPECT_TRUE(known) << "no TYPE before " << line;
    EXPECT_FALSE(samples.contains(key)) << "twice: " << key;
    samples[key] = line.substr(space + 1) == "+Inf" ? INFINITY : std::stod(line.substr(space + 1));
  }
  return samples;
}

// GET /metrics from a server on `port`, as a scraper does.
Samples Scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  auto res = client.Get("/metrics");
  EXPECT_TRUE(res) << "no answer on port " << port;
  if (!res) return {};
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), kPrometheusTextType);
  return Parse(res->body);
}

CollectiveSpec AllGather() {
  CollectiveSpec s;
  s.op = CollectiveOp::kAllGather;
  s.axes = {Axis::kX, Axis::kDcn};
  s.bytes = 1 << 20;
  return s;
}

TEST(MetricsClusterTest, ScrapedMetricsAreWhatTheJobsAndWorkersSay) {
  TestPod pod({"v5p:2x2", 2, 2, "auto"}, 0, {.heartbeat_timeout = absl::Seconds(1), .retention = {}});
  auto http = HttpServer::Start("127.0.0.1", 0,
                                {{"/metrics", Constant(kPrometheusTextType, [&] { return pod.coordinator().MetricsText(); })}});
  ASSERT_TRUE(http.ok()) << http.status();
  const int port = (*http)->port();

  const v1::Job train = pod.Run(Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 3));
  const v1::Job gather = pod.Run(AllGather());
  ASSERT_EQ(train.state(), v1::JOB_STATE_SUCCEEDED) << train.error();
  ASSERT_EQ(gather.state(), v1::JOB_STATE_SUCCEEDED) << gather.error();
  Samples m = Scrape(port);
  EXPECT_EQ(m["tpuemu_jobs{state=\"succeeded\"}"], 2);
  EXPECT_EQ(m["tpuemu_jobs{state=\"running\"}"], 0);
  EXPECT_EQ(m["tpuemu_jobs_finished_total{state=\"succeeded\"}"], 2);
  EXPECT_EQ(m.count("tpuemu_jobs_finished_total{state=\"failed\"}"), 1u);  // a series from the start, at 0
  EXPECT_EQ(m["tpuemu_jobs_finished_total{state=\"failed\"}"], 0);
  EXPECT_EQ(m["tpuemu_queue_length"], 0);
  EXPECT_EQ(m["tpuemu_pod_ready"], 1);
  EXPECT_EQ(m["tpuemu_pod_chips"], 8);
  EXPECT_EQ(m["tpuemu_steps_total{kind=\"train\"}"], 3);
  EXPECT_EQ(m.count("tpuemu_steps_total{kind=\"matmul\"}"), 1u);  // none ran: a series at 0
  EXPECT_EQ(m["tpuemu_steps_total{kind=\"matmul\"}"], 0);
  EXPECT_EQ(m["tpuemu_steps_total{kind=\"collective\"}"], 1);
  EXPECT_EQ(m["tpuemu_step_emulated_seconds_count{kind=\"train\"}"], 3);
  double train_emulated = 0;
  for (const v1::TrainStep& s : train.steps()) train_emulated += s.emulated_step_s();
  EXPECT_DOUBLE_EQ(m["tpuemu_step_emulated_seconds_sum{kind=\"train\"}"], train_emulated);
  EXPECT_DOUBLE_EQ(m["tpuemu_step_emulated_seconds_sum{kind=\"collective\"}"], gather.result().emulated_s());
  EXPECT_EQ(m["tpuemu_step_emulated_seconds_bucket{kind=\"train\",le=\"+Inf\"}"], 3);
  // The all-gather's DCN bytes are all the DCN bytes: the training job ran on one slice.
  double gather_dcn = 0;
  for (const v1::LinkUse& l : gather.result().links()) gather_dcn += l.axis() == "dcn" ? l.emu_bytes() : 0;
  EXPECT_GT(gather_dcn, 0);
  EXPECT_EQ(m["tpuemu_link_emulated_bytes_total{link=\"dcn\"}"], gather_dcn);
  EXPECT_GT(m["tpuemu_link_emulated_bytes_total{link=\"ici\"}"], 0);
  for (int host = 0; host < 4; ++host) {
    const std::string labels = absl::StrCat("{host=\"", host, "\",slice=\"", host / 2, "\",address=\"");
    bool found = false;
    for (const auto& [key, value] : m) {
      if (key.rfind("tpuemu_worker_up" + labels, 0) == 0) {
        found = true;
        EXPECT_EQ(value, 1) << key;
      }
    }
    EXPECT_TRUE(found) << "no tpuemu_worker_up for host " << host;
  }

  // Each worker's own metrics, served as tpuemu-worker --http-port serves them:
  // its chips and links as the topology has them, a run call per step it ran,
  // and link bytes that add up, over the workers, to the coordinator's.
  double worker_ici = 0, worker_dcn = 0;
  for (int host = 0; host < 4; ++host) {
    auto served = HttpServer::Start("127.0.0.1", 0,
                                    {{"/metrics", Constant(kPrometheusTextType, [&] { return pod.node(host).MetricsText(); })}});
    ASSERT_TRUE(served.ok()) << served.status();
    Samples w = Scrape((*served)->port());
    const std::string h = absl::StrCat("host=\"", host, "\"");
    int ici_links = 0, dcn_links = 0;
    for (int chip : pod.coordinator().topology().ChipsOfHost(host)) {
      for (const auto& l : pod.coordinator().topology().OutgoingLinks(chip)) ++(l.axis == Axis::kDcn ? dcn_links : ici_links);
    }
    EXPECT_EQ(w["tpuemu_worker_configured{" + h + "}"], 1);
    EXPECT_EQ(w["tpuemu_worker_chips{" + h + "}"], 2);
    EXPECT_EQ(w["tpuemu_worker_links{" + h + ",link=\"ici\"}"], ici_links);
    EXPECT_EQ(w["tpuemu_worker_links{" + h + ",link=\"dcn\"}"], dcn_links);
    // The training job ran its 3 steps on slice 0 (hosts 0 and 1); the all-gather everywhere.
    EXPECT_EQ(w["tpuemu_worker_calls_total{" + h + ",call=\"run\"}"], host < 2 ? 4 : 1);
    EXPECT_EQ(w["tpuemu_worker_calls_total{" + h + ",call=\"prepare\"}"], host < 2 ? 2 : 1);
    EXPECT_EQ(w["tpuemu_worker_errors_total{" + h + ",call=\"run\"}"], 0);
    EXPECT_GT(w["tpuemu_worker_frames_received_total{" + h + "}"], 0);
    EXPECT_GT(w["tpuemu_worker_resident_bytes{" + h + "}"], 0);
    // A name means one thing wherever it is scraped: the coordinator's
    // figure of a worker's memory at its last heartbeat once shared the
    // worker's own name for its memory now, and a sum over both counted
    // every worker twice.
    for (const auto& [key, value] : w) {
      const std::string name = key.substr(0, key.find('{'));
      for (const auto& [coordinator_key, unused] : m) {
        EXPECT_NE(coordinator_key.substr(0, coordinator_key.find('{')), name) << "both serve " << name;
      }
    }
    worker_ici += w["tpuemu_worker_link_emulated_bytes_total{" + h + ",link=\"ici\"}"];
    worker_dcn += w["tpuemu_worker_link_emulated_bytes_total{" + h + ",link=\"dcn\"}"];
  }
  EXPECT_EQ(worker_ici, m["tpuemu_link_emulated_bytes_total{link=\"ici\"}"]);
  EXPECT_EQ(worker_dcn, m["tpuemu_link_emulated_bytes_total{link=\"dcn\"}"]);

  // While a job runs and another waits, and after a worker is lost.
  auto running = pod.Submit(Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 100000));
  ASSERT_TRUE(running.ok()) << running.status();
  auto waiting = pod.Submit(Job("ici_fsdp_parallelism: -1\n", 1));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  m = Scrape(port);
  EXPECT_EQ(m["tpuemu_jobs{state=\"running\"}"], 1);
  EXPECT_EQ(m["tpuemu_jobs{state=\"pending\"}"], 1);
  EXPECT_EQ(m["tpuemu_queue_length"], 1);
  pod.Stop(3);
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;) {
    m = Scrape(port);
    bool lost = false;
    for (const auto& [key, value] : m) lost |= key.rfind("tpuemu_worker_up{host=\"3\"", 0) == 0 && value == 0;
    if (lost) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(m["tpuemu_pod_ready"], 0);
  EXPECT_EQ(m["tpuemu_jobs{state=\"running\"}"], 1);  // slice 0's job runs on
  ASSERT_TRUE(pod.coordinator().CancelJob(waiting->id()).ok());
  ASSERT_TRUE(pod.coordinator().CancelJob(running->id()).ok());
  pod.Wait(running->id());
  pod.Resume(3);
}

}  // namespace
}  // namespace tpuemu

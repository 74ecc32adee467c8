// Sweeps over MPI ranks (`mpirun -n N sparsp sweep`): SweepRanks over MPI_COMM_WORLD. Built with
// MPI when CMake finds it (SPARSP_HAVE_MPI); without it mpi_sweep_ranks() is an error and the
// rest of sparsp is unchanged. Public surface: include/sparsp/sweep.hpp.
//
// Messages from a rank to rank 0, tag kRowsTag: three int64 (point, rows, skipped) then the
// rows' text. MPI keeps the order of messages between two ranks on one tag (non-overtaking), so
// rank 0 receives each rank's points in the order they were sent.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sparsp/sweep.hpp"

#ifdef SPARSP_HAVE_MPI
#include <mpi.h>
#endif

namespace sparsp::study {

namespace {

// A launcher's environment variable holding the job's process count (Open MPI's mpirun, and
// the PMI of Slurm's srun / MPICH's hydra).
bool env_above_one(const char* name) {
  const char* v = std::getenv(name);
  return v && std::atoi(v) > 1;
}

#ifdef SPARSP_HAVE_MPI
constexpr int kRowsTag = 17;
constexpr size_t kHeaderBytes = 3 * sizeof(int64_t);

std::string mpi_error(const char* call, int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(rc, text, &n) != MPI_SUCCESS) n = 0;
  return std::string("MPI: ") + call + " failed: " + std::string(text, static_cast<size_t>(n));
}

class MpiRanks final : public SweepRanks {
 public:
  MpiRanks(int rank, int size) : rank_(rank), size_(size) {}
  ~MpiRanks() override {
    if (abandon_code_ != 0)
      MPI_Abort(MPI_COMM_WORLD, abandon_code_);
    else
      MPI_Finalize();
  }
  void abandon(int exit_code) override { abandon_code_ = exit_code != 0 ? exit_code : 1; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void broadcast(std::vector<int64_t>& values) override {
    MPI_Bcast(values.data(), static_cast<int>(values.size()), MPI_INT64_T, 0, MPI_COMM_WORLD);
  }

  Status send_to_root(const PointRows& r) override {
    std::string msg(kHeaderBytes, '\0');
    const int64_t head[3] = {r.point, r.rows, r.skipped ? 1 : 0};
    std::memcpy(msg.data(), head, kHeaderBytes);
    msg += r.text;
    const int rc =
        MPI_Send(msg.data(), static_cast<int>(msg.size()), MPI_CHAR, 0, kRowsTag, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return Error{mpi_error("MPI_Send", rc), 1};
    return Ok{};
  }

  Result<PointRows> receive_from(int from) override {
    // Polls with short sleeps: a blocking MPI_Recv spins a core that rank 0's own workers need.
    MPI_Status st;
    for (int flag = 0, waited_us = 0; !flag;) {
      if (const int rc = MPI_Iprobe(from, kRowsTag, MPI_COMM_WORLD, &flag, &st); rc != MPI_SUCCESS)
        return Error{mpi_error("MPI_Iprobe", rc), 1};
      if (!flag) {
        waited_us = std::min(waited_us + 50, 2000);
        std::this_thread::sleep_for(std::chrono::microseconds(waited_us));
      }
    }
    int count = 0;
    MPI_Get_count(&st, MPI_CHAR, &count);
    std::string msg(static_cast<size_t>(count), '\0');
    if (const int rc = MPI_Recv(msg.data(), count, MPI_CHAR, from, kRowsTag, MPI_COMM_WORLD,
                                MPI_STATUS_IGNORE);
        rc != MPI_SUCCESS)
      return Error{mpi_error("MPI_Recv", rc), 1};
    if (msg.size() < kHeaderBytes)
      return Error{"MPI: a message of " + std::to_string(count) + " bytes from rank " +
                       std::to_string(from) + " (expected at least 24)",
                   1};
    int64_t head[3];
    std::memcpy(head, msg.data(), kHeaderBytes);
    return PointRows{head[0], head[1], head[2] != 0, msg.substr(kHeaderBytes)};
  }

 private:
  int rank_, size_;
  int abandon_code_ = 0;
};
#endif

}  // namespace

bool mpi_available() {
#ifdef SPARSP_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool mpi_launched() { return env_above_one("OMPI_COMM_WORLD_SIZE") || env_above_one("PMI_SIZE"); }

Result<std::unique_ptr<SweepRanks>> mpi_sweep_ranks() {
#ifdef SPARSP_HAVE_MPI
  int provided = 0;
  // Serialized: the ranks' messages are sent and received from oneTBB's writer stage, one call
  // at a time but not always from the main thread.
  if (const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      rc != MPI_SUCCESS)
    return Error{mpi_error("MPI_Init_thread", rc), 1};
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return Error{
        "MPI: this MPI library does not allow calls from several threads "
        "(MPI_THREAD_SERIALIZED)",
        1};
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<SweepRanks>(std::make_unique<MpiRanks>(rank, size));
#else
  return Error{
      "this sparsp was built without MPI (install libopenmpi-dev and reconfigure); "
      "spread a sweep over machines with --shard K/N and `sparsp sweep merge`",
      1};
#endif
}

}  // namespace sparsp::study

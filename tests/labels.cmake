# SPDX-License-Identifier: MIT
# ctest labels, given after every test exists (CMakeLists.txt includes this after tests.cmake):
#     unit   the tests/test_*.c executables that finish in a few seconds (ctest -L unit: about a
#            minute on a loaded 2-core machine)
#     cli    everything else: the tests/cli_*.sh runs of ddpc, PyTorch parity, the collective
#            conformance suites, the multi-host bed, and the unit executables listed below
#     slow   of those, the ones allowed more than 300 s (their TIMEOUT says so)
# Every test gets unit or cli (tests/cli_labels.sh checks it), so `ctest -L unit` and
# `ctest -L cli` together run the whole suite; the labels set earlier (slurm, multihost) stay.

# test_*.c executables that take seconds, not a fraction of one (measured on the loaded 2-core
# machine, 2026-11-27: 7 to 44 s each; the rest, ctest -L unit, took 28 s at load 4.5):
# checkpoints written and read whole, the store under abuse, ranks forked or started by mpiexec,
# the launcher's timeouts and faults, Fashion-MNIST.
set(DDPC_NOT_UNIT_TESTS test_train_checkpoint test_train_checkpoint_crash
    test_train_checkpoint_shard test_safetensors test_safetensors_write test_comm_store_abuse
    test_comm_shm_rdzv test_comm_shm test_comm_mpi test_comm_mpi_diag test_launch_timeout
    test_launch_faults test_parallel_zero test_data_fmnist test_kernels_lowp)

get_property(ddpc_all_tests DIRECTORY PROPERTY TESTS)
foreach(t IN LISTS ddpc_all_tests)
    # test_X_isa_avx2 runs test_X's executable again under a capped ISA: it is as slow as test_X.
    string(REGEX REPLACE "_isa_[a-z0-9]+$" "" base "${t}")
    if(t MATCHES "^test_" AND NOT base IN_LIST DDPC_NOT_UNIT_TESTS)
        set_property(TEST ${t} APPEND PROPERTY LABELS unit)
    else()
        set_property(TEST ${t} APPEND PROPERTY LABELS cli)
    endif()
    get_test_property(${t} TIMEOUT limit)
    if(limit AND limit GREATER 300)
        set_property(TEST ${t} APPEND PROPERTY LABELS slow)
    endif()
endforeach()

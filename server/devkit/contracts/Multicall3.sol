// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title The part of Multicall3 that viem (aggregate3) and x402 facilitators (tryAggregate) call.
/// @notice Base has Multicall3 at 0xcA11bde05977b3631167028862bE2a173976CA11; a bare anvil has nothing there. The
/// chain kit puts this runtime code at that address so batched reads and x402's failure diagnostics work locally.
contract Multicall3 {
    struct Call {
        address target;
        bytes callData;
    }

    struct Call3 {
        address target;
        bool allowFailure;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    function tryAggregate(bool requireSuccess, Call[] calldata calls) external returns (Result[] memory results) {
        results = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; i++) {
            (bool success, bytes memory returnData) = calls[i].target.call(calls[i].callData);
            require(success || !requireSuccess, "Multicall3: call failed");
            results[i] = Result(success, returnData);
        }
    }

    function aggregate3(Call3[] calldata calls) external returns (Result[] memory results) {
        results = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; i++) {
            (bool success, bytes memory returnData) = calls[i].target.call(calls[i].callData);
            require(success || calls[i].allowFailure, "Multicall3: call failed");
            results[i] = Result(success, returnData);
        }
    }
}

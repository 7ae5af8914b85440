// Generated from ../TestUSDC.sol by `npm run contracts:build`; do not edit.
export const artifact = {
  "contractName": "TestUSDC",
  "compiler": "solc-js 0.8.28+commit.7893614a.Emscripten.clang",
  "abi": [
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "initialOwner",
          "type": "address"
        }
      ],
      "stateMutability": "nonpayable",
      "type": "constructor"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "spender",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "allowance",
          "type": "uint256"
        },
        {
          "internalType": "uint256",
          "name": "needed",
          "type": "uint256"
        }
      ],
      "name": "ERC20InsufficientAllowance",
      "type": "error"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "sender",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "balance",
          "type": "uint256"
        },
        {
          "internalType": "uint256",
          "name": "needed",
          "type": "uint256"
        }
      ],
      "name": "ERC20InsufficientBalance",
      "type": "error"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "approver",
          "type": "address"
        }
      ],
      "name": "ERC20InvalidApprover",
      "type": "error"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "receiver",
          "type": "address"
        }
      ],
      "name": "ERC20InvalidReceiver",
      "type": "error"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "sender",
          "type": "address"
        }
      ],
      "name": "ERC20InvalidSender",
      "type": "error"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "spender",
          "type": "address"
        }
      ],
      "name": "ERC20InvalidSpender",
      "type": "error"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "account",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "currentNonce",
          "type": "uint256"
        }
      ],
      "name": "InvalidAccountNonce",
      "type": "error"
    },
    {
      "inputs": [],
      "name": "InvalidShortString",
      "type": "error"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "owner",
          "type": "address"
        }
      ],
      "name": "OwnableInvalidOwner",
      "type": "error"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "account",
          "type": "address"
        }
      ],
      "name": "OwnableUnauthorizedAccount",
      "type": "error"
    },
    {
      "inputs": [
        {
          "internalType": "string",
          "name": "str",
          "type": "string"
        }
      ],
      "name": "StringTooLong",
      "type": "error"
    },
    {
      "anonymous": false,
      "inputs": [
        {
          "indexed": true,
          "internalType": "address",
          "name": "owner",
          "type": "address"
        },
        {
          "indexed": true,
          "internalType": "address",
          "name": "spender",
          "type": "address"
        },
        {
          "indexed": false,
          "internalType": "uint256",
          "name": "value",
          "type": "uint256"
        }
      ],
      "name": "Approval",
      "type": "event"
    },
    {
      "anonymous": false,
      "inputs": [
        {
          "indexed": true,
          "internalType": "address",
          "name": "authorizer",
          "type": "address"
        },
        {
          "indexed": true,
          "internalType": "bytes32",
          "name": "nonce",
          "type": "bytes32"
        }
      ],
      "name": "AuthorizationCanceled",
      "type": "event"
    },
    {
      "anonymous": false,
      "inputs": [
        {
          "indexed": true,
          "internalType": "address",
          "name": "authorizer",
          "type": "address"
        },
        {
          "indexed": true,
          "internalType": "bytes32",
          "name": "nonce",
          "type": "bytes32"
        }
      ],
      "name": "AuthorizationUsed",
      "type": "event"
    },
    {
      "anonymous": false,
      "inputs": [],
      "name": "EIP712DomainChanged",
      "type": "event"
    },
    {
      "anonymous": false,
      "inputs": [
        {
          "indexed": true,
          "internalType": "address",
          "name": "previousOwner",
          "type": "address"
        },
        {
          "indexed": true,
          "internalType": "address",
          "name": "newOwner",
          "type": "address"
        }
      ],
      "name": "OwnershipTransferred",
      "type": "event"
    },
    {
      "anonymous": false,
      "inputs": [
        {
          "indexed": true,
          "internalType": "address",
          "name": "from",
          "type": "address"
        },
        {
          "indexed": true,
          "internalType": "address",
          "name": "to",
          "type": "address"
        },
        {
          "indexed": false,
          "internalType": "uint256",
          "name": "value",
          "type": "uint256"
        }
      ],
      "name": "Transfer",
      "type": "event"
    },
    {
      "inputs": [],
      "name": "CANCEL_AUTHORIZATION_TYPEHASH",
      "outputs": [
        {
          "internalType": "bytes32",
          "name": "",
          "type": "bytes32"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [],
      "name": "DOMAIN_SEPARATOR",
      "outputs": [
        {
          "internalType": "bytes32",
          "name": "",
          "type": "bytes32"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [],
      "name": "PERMIT_TYPEHASH",
      "outputs": [
        {
          "internalType": "bytes32",
          "name": "",
          "type": "bytes32"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [],
      "name": "RECEIVE_WITH_AUTHORIZATION_TYPEHASH",
      "outputs": [
        {
          "internalType": "bytes32",
          "name": "",
          "type": "bytes32"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [],
      "name": "TRANSFER_WITH_AUTHORIZATION_TYPEHASH",
      "outputs": [
        {
          "internalType": "bytes32",
          "name": "",
          "type": "bytes32"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "owner",
          "type": "address"
        },
        {
          "internalType": "address",
          "name": "spender",
          "type": "address"
        }
      ],
      "name": "allowance",
      "outputs": [
        {
          "internalType": "uint256",
          "name": "",
          "type": "uint256"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "spender",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "value",
          "type": "uint256"
        }
      ],
      "name": "approve",
      "outputs": [
        {
          "internalType": "bool",
          "name": "",
          "type": "bool"
        }
      ],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "authorizer",
          "type": "address"
        },
        {
          "internalType": "bytes32",
          "name": "nonce",
          "type": "bytes32"
        }
      ],
      "name": "authorizationState",
      "outputs": [
        {
          "internalType": "bool",
          "name": "",
          "type": "bool"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "account",
          "type": "address"
        }
      ],
      "name": "balanceOf",
      "outputs": [
        {
          "internalType": "uint256",
          "name": "",
          "type": "uint256"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "authorizer",
          "type": "address"
        },
        {
          "internalType": "bytes32",
          "name": "nonce",
          "type": "bytes32"
        },
        {
          "internalType": "uint8",
          "name": "v",
          "type": "uint8"
        },
        {
          "internalType": "bytes32",
          "name": "r",
          "type": "bytes32"
        },
        {
          "internalType": "bytes32",
          "name": "s",
          "type": "bytes32"
        }
      ],
      "name": "cancelAuthorization",
      "outputs": [],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "authorizer",
          "type": "address"
        },
        {
          "internalType": "bytes32",
          "name": "nonce",
          "type": "bytes32"
        },
        {
          "internalType": "bytes",
          "name": "signature",
          "type": "bytes"
        }
      ],
      "name": "cancelAuthorization",
      "outputs": [],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [],
      "name": "decimals",
      "outputs": [
        {
          "internalType": "uint8",
          "name": "",
          "type": "uint8"
        }
      ],
      "stateMutability": "pure",
      "type": "function"
    },
    {
      "inputs": [],
      "name": "eip712Domain",
      "outputs": [
        {
          "internalType": "bytes1",
          "name": "fields",
          "type": "bytes1"
        },
        {
          "internalType": "string",
          "name": "name",
          "type": "string"
        },
        {
          "internalType": "string",
          "name": "version",
          "type": "string"
        },
        {
          "internalType": "uint256",
          "name": "chainId",
          "type": "uint256"
        },
        {
          "internalType": "address",
          "name": "verifyingContract",
          "type": "address"
        },
        {
          "internalType": "bytes32",
          "name": "salt",
          "type": "bytes32"
        },
        {
          "internalType": "uint256[]",
          "name": "extensions",
          "type": "uint256[]"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "to",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "amount",
          "type": "uint256"
        }
      ],
      "name": "mint",
      "outputs": [],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [],
      "name": "name",
      "outputs": [
        {
          "internalType": "string",
          "name": "",
          "type": "string"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "owner",
          "type": "address"
        }
      ],
      "name": "nonces",
      "outputs": [
        {
          "internalType": "uint256",
          "name": "",
          "type": "uint256"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [],
      "name": "owner",
      "outputs": [
        {
          "internalType": "address",
          "name": "",
          "type": "address"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "owner",
          "type": "address"
        },
        {
          "internalType": "address",
          "name": "spender",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "value",
          "type": "uint256"
        },
        {
          "internalType": "uint256",
          "name": "deadline",
          "type": "uint256"
        },
        {
          "internalType": "bytes",
          "name": "signature",
          "type": "bytes"
        }
      ],
      "name": "permit",
      "outputs": [],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "owner",
          "type": "address"
        },
        {
          "internalType": "address",
          "name": "spender",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "value",
          "type": "uint256"
        },
        {
          "internalType": "uint256",
          "name": "deadline",
          "type": "uint256"
        },
        {
          "internalType": "uint8",
          "name": "v",
          "type": "uint8"
        },
        {
          "internalType": "bytes32",
          "name": "r",
          "type": "bytes32"
        },
        {
          "internalType": "bytes32",
          "name": "s",
          "type": "bytes32"
        }
      ],
      "name": "permit",
      "outputs": [],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "from",
          "type": "address"
        },
        {
          "internalType": "address",
          "name": "to",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "value",
          "type": "uint256"
        },
        {
          "internalType": "uint256",
          "name": "validAfter",
          "type": "uint256"
        },
        {
          "internalType": "uint256",
          "name": "validBefore",
          "type": "uint256"
        },
        {
          "internalType": "bytes32",
          "name": "nonce",
          "type": "bytes32"
        },
        {
          "internalType": "bytes",
          "name": "signature",
          "type": "bytes"
        }
      ],
      "name": "receiveWithAuthorization",
      "outputs": [],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "from",
          "type": "address"
        },
        {
          "internalType": "address",
          "name": "to",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "value",
          "type": "uint256"
        },
        {
          "internalType": "uint256",
          "name": "validAfter",
          "type": "uint256"
        },
        {
          "internalType": "uint256",
          "name": "validBefore",
          "type": "uint256"
        },
        {
          "internalType": "bytes32",
          "name": "nonce",
          "type": "bytes32"
        },
        {
          "internalType": "uint8",
          "name": "v",
          "type": "uint8"
        },
        {
          "internalType": "bytes32",
          "name": "r",
          "type": "bytes32"
        },
        {
          "internalType": "bytes32",
          "name": "s",
          "type": "bytes32"
        }
      ],
      "name": "receiveWithAuthorization",
      "outputs": [],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [],
      "name": "renounceOwnership",
      "outputs": [],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [],
      "name": "symbol",
      "outputs": [
        {
          "internalType": "string",
          "name": "",
          "type": "string"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [],
      "name": "totalSupply",
      "outputs": [
        {
          "internalType": "uint256",
          "name": "",
          "type": "uint256"
        }
      ],
      "stateMutability": "view",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "to",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "value",
          "type": "uint256"
        }
      ],
      "name": "transfer",
      "outputs": [
        {
          "internalType": "bool",
          "name": "",
          "type": "bool"
        }
      ],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "from",
          "type": "address"
        },
        {
          "internalType": "address",
          "name": "to",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "value",
          "type": "uint256"
        }
      ],
      "name": "transferFrom",
      "outputs": [
        {
          "internalType": "bool",
          "name": "",
          "type": "bool"
        }
      ],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "newOwner",
          "type": "address"
        }
      ],
      "name": "transferOwnership",
      "outputs": [],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "from",
          "type": "address"
        },
        {
          "internalType": "address",
          "name": "to",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "value",
          "type": "uint256"
        },
        {
          "internalType": "uint256",
          "name": "validAfter",
          "type": "uint256"
        },
        {
          "internalType": "uint256",
          "name": "validBefore",
          "type": "uint256"
        },
        {
          "internalType": "bytes32",
          "name": "nonce",
          "type": "bytes32"
        },
        {
          "internalType": "bytes",
          "name": "signature",
          "type": "bytes"
        }
      ],
      "name": "transferWithAuthorization",
      "outputs": [],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [
        {
          "internalType": "address",
          "name": "from",
          "type": "address"
        },
        {
          "internalType": "address",
          "name": "to",
          "type": "address"
        },
        {
          "internalType": "uint256",
          "name": "value",
          "type": "uint256"
        },
        {
          "internalType": "uint256",
          "name": "validAfter",
          "type": "uint256"
        },
        {
          "internalType": "uint256",
          "name": "validBefore",
          "type": "uint256"
        },
        {
          "internalType": "bytes32",
          "name": "nonce",
          "type": "bytes32"
        },
        {
          "internalType": "uint8",
          "name": "v",
          "type": "uint8"
        },
        {
          "internalType": "bytes32",
          "name": "r",
          "type": "bytes32"
        },
        {
          "internalType": "bytes32",
          "name": "s",
          "type": "bytes32"
        }
      ],
      "name": "transferWithAuthorization",
      "outputs": [],
      "stateMutability": "nonpayable",
      "type": "function"
    },
    {
      "inputs": [],
      "name": "version",
      "outputs": [
        {
          "internalType": "string",
          "name": "",
          "type": "string"
        }
      ],
      "stateMutability": "pure",
      "type": "function"
    }
  ],
  "bytecode": "0x610160604052348015610010575f5ffd5b50604051611ec6380380611ec683398101604081905261002f91610245565b80604051806040016040528060088152602001672aa9a21021b7b4b760c11b815250604051806040016040528060018152602001601960f91b815250604051806040016040528060088152602001672aa9a21021b7b4b760c11b815250604051806040016040528060048152602001635553444360e01b81525081600390816100b8919061030a565b5060046100c5828261030a565b5050506100d7826101b760201b60201c565b610120526100e4816101b7565b61014052815160208084019190912060e052815190820120610100524660a05261017060e05161010051604080517f8b73c3c69bb8fe3d512ecc4cf759cc79239f7b179b0ffacaa9a75d522b39400f60208201529081019290925260608201524660808201523060a08201525f9060c00160405160208183030381529060405280519060200120905090565b60805250503060c0526001600160a01b0381166101a757604051631e4fbdf760e01b81525f60048201526024015b60405180910390fd5b6101b0816101f4565b505061041c565b5f5f829050601f815111156101e1578260405163305a27a960e01b815260040161019e91906103c4565b80516101ec826103f9565b179392505050565b600880546001600160a01b038381166001600160a01b0319831681179093556040519116919082907f8be0079c531659141344cd1fd0a4f28419497f9722a3daafe3b4186f6b6457e0905f90a35050565b5f60208284031215610255575f5ffd5b81516001600160a01b038116811461026b575f5ffd5b9392505050565b634e487b7160e01b5f52604160045260245ffd5b600181811c9082168061029a57607f821691505b6020821081036102b857634e487b7160e01b5f52602260045260245ffd5b50919050565b601f82111561030557805f5260205f20601f840160051c810160208510156102e35750805b601f840160051c820191505b81811015610302575f81556001016102ef565b50505b505050565b81516001600160401b0381111561032357610323610272565b610337816103318454610286565b846102be565b6020601f821160018114610369575f83156103525750848201515b5f19600385901b1c1916600184901b178455610302565b5f84815260208120601f198516915b828110156103985787850151825560209485019460019092019101610378565b50848210156103b557868401515f19600387901b60f8161c191681555b50505050600190811b01905550565b602081525f82518060208401528060208501604085015e5f604082850101526040601f19601f83011684010191505092915050565b805160208083015191908110156102b8575f1960209190910360031b1b16919050565b60805160a05160c05160e051610100516101205161014051611a5961046d5f395f610c2b01525f610c0001525f610a2c01525f610a0401525f61095f01525f61098901525f6109b30152611a595ff3fe608060405234801561000f575f5ffd5b50600436106101d1575f3560e01c806388b7ab63116100fe578063cf0929951161009e578063e3ee160e1161006e578063e3ee160e1461045e578063e94a010214610471578063ef55bec6146104a9578063f2fde38b146104bc575f5ffd5b8063cf092995146103d9578063d505accf146103ec578063d9169487146103ff578063dd62ed3e14610426575f5ffd5b80639fd5a6cf116100d95780639fd5a6cf14610379578063a0cc6a681461038c578063a9059cbb146103b3578063b7b72899146103c6575f5ffd5b806388b7ab63146103435780638da5cb5b1461035657806395d89b4114610371575f5ffd5b806340c10f1911610174578063715018a611610144578063715018a6146102e65780637ecebe00146102ee5780637f2eecc31461030157806384b0196e14610328575f5ffd5b806340c10f191461027957806354fd4d501461028e5780635a049a70146102ab57806370a08231146102be575f5ffd5b806323b872dd116101af57806323b872dd1461022857806330adf81f1461023b578063313ce567146102625780633644e51514610271575f5ffd5b806306fdde03146101d5578063095ea7b3146101f357806318160ddd14610216575b5f5ffd5b6101dd6104cf565b6040516101ea91906114c8565b60405180910390f35b6102066102013660046114f5565b61055f565b60405190151581526020016101ea565b6002545b6040519081526020016101ea565b61020661023636600461151d565b610578565b61021a7f6e71edae12b1b97f4d1f60370fef10105fa2faae0126114a169c64845d6126c981565b604051600681526020016101ea565b61021a61059d565b61028c6102873660046114f5565b6105ab565b005b6040805180820190915260018152601960f91b60208201526101dd565b61028c6102b9366004611567565b6105c1565b61021a6102cc3660046115b1565b6001600160a01b03165f9081526020819052604090205490565b61028c6105f6565b61021a6102fc3660046115b1565b610609565b61021a7fd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de881565b610330610626565b6040516101ea97969594939291906115ca565b61028c6103513660046116ff565b610668565b6008546040516001600160a01b0390911681526020016101ea565b6101dd6106d2565b61028c61038736600461177e565b6106e1565b61021a7f7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a226781565b6102066103c13660046114f5565b6106ee565b61028c6103d43660046117eb565b6106fb565b61028c6103e73660046116ff565b61070b565b61028c6103fa36600461183e565b61073b565b61021a7f158b0a9edf7a828aad02f63cd515c68ef2f50ba807396f6d12842833a159742981565b61021a6104343660046118a4565b6001600160a01b039182165f90815260016020908152604080832093909416825291909152205490565b61028c61046c3660046118d5565b61076b565b61020661047f3660046114f5565b6001600160a01b03919091165f908152600960209081526040808320938352929052205460ff1690565b61028c6104b73660046118d5565b6107c9565b61028c6104ca3660046115b1565b610830565b6060600380546104de90611950565b80601f016020809104026020016040519081016040528092919081815260200182805461050a90611950565b80156105555780601f1061052c57610100808354040283529160200191610555565b820191905f5260205f20905b81548152906001019060200180831161053857829003601f168201915b5050505050905090565b5f3361056c81858561086d565b60019150505b92915050565b5f3361058585828561087a565b6105908585856108f6565b60019150505b9392505050565b5f6105a6610953565b905090565b6105b3610a7c565b6105bd8282610aa9565b5050565b6105ef85858484876040516020016105db93929190611988565b604051602081830303815290604052610add565b5050505050565b6105fe610a7c565b6106075f610ba8565b565b6001600160a01b0381165f90815260076020526040812054610572565b5f6060805f5f5f6060610637610bf9565b61063f610c24565b604080515f80825260208201909252600f60f81b9b939a50919850469750309650945092509050565b6001600160a01b03861633146106995760405162461bcd60e51b8152600401610690906119ab565b60405180910390fd5b6106c97fd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de888888888888888610c4f565b50505050505050565b6060600480546104de90611950565b6105ef8585858585610ddb565b5f3361056c8185856108f6565b610706838383610add565b505050565b6106c97f7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a226788888888888888610c4f565b6106c98787878786868960405160200161075793929190611988565b604051602081830303815290604052610ddb565b6107be7f7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a22678a8a8a8a8a8a89898c6040516020016107aa93929190611988565b604051602081830303815290604052610c4f565b505050505050505050565b6001600160a01b03881633146107f15760405162461bcd60e51b8152600401610690906119ab565b6107be7fd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de88a8a8a8a8a8a89898c6040516020016107aa93929190611988565b610838610a7c565b6001600160a01b03811661086157604051631e4fbdf760e01b81525f6004820152602401610690565b61086a81610ba8565b50565b6107068383836001610f43565b6001600160a01b038381165f908152600160209081526040808320938616835292905220545f198110156108f057818110156108e257604051637dc7a0d960e11b81526001600160a01b03841660048201526024810182905260448101839052606401610690565b6108f084848484035f610f43565b50505050565b6001600160a01b03831661091f57604051634b637e8f60e11b81525f6004820152602401610690565b6001600160a01b0382166109485760405163ec442f0560e01b81525f6004820152602401610690565b610706838383611015565b5f306001600160a01b037f0000000000000000000000000000000000000000000000000000000000000000161480156109ab57507f000000000000000000000000000000000000000000000000000000000000000046145b156109d557507f000000000000000000000000000000000000000000000000000000000000000090565b6105a6604080517f8b73c3c69bb8fe3d512ecc4cf759cc79239f7b179b0ffacaa9a75d522b39400f60208201527f0000000000000000000000000000000000000000000000000000000000000000918101919091527f000000000000000000000000000000000000000000000000000000000000000060608201524660808201523060a08201525f9060c00160405160208183030381529060405280519060200120905090565b6008546001600160a01b031633146106075760405163118cdaa760e01b8152336004820152602401610690565b6001600160a01b038216610ad25760405163ec442f0560e01b81525f6004820152602401610690565b6105bd5f8383611015565b610ae7838361113b565b604080517f158b0a9edf7a828aad02f63cd515c68ef2f50ba807396f6d12842833a159742960208201526001600160a01b0385169181019190915260608101839052610b4e90849060800160405160208183030381529060405280519060200120836111c5565b6001600160a01b0383165f818152600960209081526040808320868452909152808220805460ff19166001179055518492917f1cdd46ff242716cdaa72d159d339a485b3438398348d68f09d7c8c0a59353d8191a3505050565b600880546001600160a01b038381166001600160a01b0319831681179093556040519116919082907f8be0079c531659141344cd1fd0a4f28419497f9722a3daafe3b4186f6b6457e0905f90a35050565b60606105a67f0000000000000000000000000000000000000000000000000000000000000000611224565b60606105a67f0000000000000000000000000000000000000000000000000000000000000000611224565b834211610cb25760405162461bcd60e51b815260206004820152602b60248201527f46696174546f6b656e56323a20617574686f72697a6174696f6e206973206e6f60448201526a1d081e595d081d985b1a5960aa1b6064820152608401610690565b824210610d0f5760405162461bcd60e51b815260206004820152602560248201527f46696174546f6b656e56323a20617574686f72697a6174696f6e2069732065786044820152641c1a5c995960da1b6064820152608401610690565b610d19878361113b565b6040805160208082018b90526001600160a01b038a811683850152891660608301526080820188905260a0820187905260c0820186905260e0808301869052835180840390910181526101009092019092528051910120610d7b8882846111c5565b6001600160a01b0388165f818152600960209081526040808320878452909152808220805460ff19166001179055518592917f98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a591a36107be8888886108f6565b5f19821480610dea5750428210155b610e365760405162461bcd60e51b815260206004820152601e60248201527f46696174546f6b656e56323a207065726d6974206973206578706972656400006044820152606401610690565b5f7f6e71edae12b1b97f4d1f60370fef10105fa2faae0126114a169c64845d6126c9868686610e818a6001600160a01b03165f90815260076020526040902080546001810190915590565b6040805160208101969096526001600160a01b0394851690860152929091166060840152608083015260a082015260c0810184905260e001604051602081830303815290604052805190602001209050610ee486610ede83611261565b8461128d565b610f305760405162461bcd60e51b815260206004820152601a60248201527f454950323631323a20696e76616c6964207369676e61747572650000000000006044820152606401610690565b610f3b86868661086d565b505050505050565b6001600160a01b038416610f6c5760405163e602df0560e01b81525f6004820152602401610690565b6001600160a01b038316610f9557604051634a1406b160e11b81525f6004820152602401610690565b6001600160a01b038085165f90815260016020908152604080832093871683529290522082905580156108f057826001600160a01b0316846001600160a01b03167f8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b9258460405161100791815260200190565b60405180910390a350505050565b6001600160a01b03831661103f578060025f82825461103491906119f0565b909155506110af9050565b6001600160a01b0383165f90815260208190526040902054818110156110915760405163391434e360e21b81526001600160a01b03851660048201526024810182905260448101839052606401610690565b6001600160a01b0384165f9081526020819052604090209082900390555b6001600160a01b0382166110cb576002805482900390556110e9565b6001600160a01b0382165f9081526020819052604090208054820190555b816001600160a01b0316836001600160a01b03167fddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef8360405161112e91815260200190565b60405180910390a3505050565b6001600160a01b0382165f90815260096020908152604080832084845290915290205460ff16156105bd5760405162461bcd60e51b815260206004820152602e60248201527f46696174546f6b656e56323a20617574686f72697a6174696f6e20697320757360448201526d1959081bdc8818d85b98d95b195960921b6064820152608401610690565b6111d8836111d284611261565b8361128d565b6107065760405162461bcd60e51b815260206004820152601e60248201527f46696174546f6b656e56323a20696e76616c6964207369676e617475726500006044820152606401610690565b60605f611230836112fd565b6040805160208082528183019092529192505f91906020820181803683375050509182525060208101929092525090565b5f61057261126d610953565b8360405161190160f01b8152600281019290925260228201526042902090565b5f836001600160a01b03163b5f036112eb575f5f6112ab8585611324565b5090925090505f8160038111156112c4576112c4611a0f565b1480156112e25750856001600160a01b0316826001600160a01b0316145b92505050610596565b6112f684848461136d565b9050610596565b5f60ff8216601f81111561057257604051632cd44ac360e21b815260040160405180910390fd5b5f5f5f835160410361135b576020840151604085015160608601515f1a61134d888285856113d2565b955095509550505050611366565b505081515f91506002905b9250925092565b805160408051630b135d3f60e11b8082526004820186905260248201929092525f92906020820185604483015e5f82606483010152601f820160051c60051b915060205f60648401838a5afa9050825f5114601f3d1116811693505050509392505050565b5f80807f7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a084111561140b57505f91506003905082611490565b604080515f808252602082018084528a905260ff891692820192909252606081018790526080810186905260019060a0016020604051602081039080840390855afa15801561145c573d5f5f3e3d5ffd5b5050604051601f1901519150506001600160a01b03811661148757505f925060019150829050611490565b92505f91508190505b9450945094915050565b5f81518084528060208401602086015e5f602082860101526020601f19601f83011685010191505092915050565b602081525f610596602083018461149a565b80356001600160a01b03811681146114f0575f5ffd5b919050565b5f5f60408385031215611506575f5ffd5b61150f836114da565b946020939093013593505050565b5f5f5f6060848603121561152f575f5ffd5b611538846114da565b9250611546602085016114da565b929592945050506040919091013590565b803560ff811681146114f0575f5ffd5b5f5f5f5f5f60a0868803121561157b575f5ffd5b611584866114da565b94506020860135935061159960408701611557565b94979396509394606081013594506080013592915050565b5f602082840312156115c1575f5ffd5b610596826114da565b60ff60f81b8816815260e060208201525f6115e860e083018961149a565b82810360408401526115fa818961149a565b606084018890526001600160a01b038716608085015260a0840186905283810360c0850152845180825260208087019350909101905f5b8181101561164f578351835260209384019390920191600101611631565b50909b9a5050505050505050505050565b634e487b7160e01b5f52604160045260245ffd5b5f82601f830112611683575f5ffd5b813567ffffffffffffffff81111561169d5761169d611660565b604051601f8201601f19908116603f0116810167ffffffffffffffff811182821017156116cc576116cc611660565b6040528181528382016020018510156116e3575f5ffd5b816020850160208301375f918101602001919091529392505050565b5f5f5f5f5f5f5f60e0888a031215611715575f5ffd5b61171e886114da565b965061172c602089016114da565b955060408801359450606088013593506080880135925060a0880135915060c088013567ffffffffffffffff811115611763575f5ffd5b61176f8a828b01611674565b91505092959891949750929550565b5f5f5f5f5f60a08688031215611792575f5ffd5b61179b866114da565b94506117a9602087016114da565b93506040860135925060608601359150608086013567ffffffffffffffff8111156117d2575f5ffd5b6117de88828901611674565b9150509295509295909350565b5f5f5f606084860312156117fd575f5ffd5b611806846114da565b925060208401359150604084013567ffffffffffffffff811115611828575f5ffd5b61183486828701611674565b9150509250925092565b5f5f5f5f5f5f5f60e0888a031215611854575f5ffd5b61185d886114da565b965061186b602089016114da565b9550604088013594506060880135935061188760808901611557565b9699959850939692959460a0840135945060c09093013592915050565b5f5f604083850312156118b5575f5ffd5b6118be836114da565b91506118cc602084016114da565b90509250929050565b5f5f5f5f5f5f5f5f5f6101208a8c0312156118ee575f5ffd5b6118f78a6114da565b985061190560208b016114da565b975060408a0135965060608a0135955060808a0135945060a08a0135935061192f60c08b01611557565b989b979a50959894979396929550929360e081013593506101000135919050565b600181811c9082168061196457607f821691505b60208210810361198257634e487b7160e01b5f52602260045260245ffd5b50919050565b928352602083019190915260f81b6001600160f81b031916604082015260410190565b60208082526025908201527f46696174546f6b656e56323a2063616c6c6572206d7573742062652074686520604082015264706179656560d81b606082015260800190565b8082018082111561057257634e487b7160e01b5f52601160045260245ffd5b634e487b7160e01b5f52602160045260245ffdfea2646970667358221220469b1019a21588aed8e1c234a1dd9c2eb4368b95690b20d4b6e527cbf409d51e64736f6c634300081c0033",
  "deployedBytecode": "0x608060405234801561000f575f5ffd5b50600436106101d1575f3560e01c806388b7ab63116100fe578063cf0929951161009e578063e3ee160e1161006e578063e3ee160e1461045e578063e94a010214610471578063ef55bec6146104a9578063f2fde38b146104bc575f5ffd5b8063cf092995146103d9578063d505accf146103ec578063d9169487146103ff578063dd62ed3e14610426575f5ffd5b80639fd5a6cf116100d95780639fd5a6cf14610379578063a0cc6a681461038c578063a9059cbb146103b3578063b7b72899146103c6575f5ffd5b806388b7ab63146103435780638da5cb5b1461035657806395d89b4114610371575f5ffd5b806340c10f1911610174578063715018a611610144578063715018a6146102e65780637ecebe00146102ee5780637f2eecc31461030157806384b0196e14610328575f5ffd5b806340c10f191461027957806354fd4d501461028e5780635a049a70146102ab57806370a08231146102be575f5ffd5b806323b872dd116101af57806323b872dd1461022857806330adf81f1461023b578063313ce567146102625780633644e51514610271575f5ffd5b806306fdde03146101d5578063095ea7b3146101f357806318160ddd14610216575b5f5ffd5b6101dd6104cf565b6040516101ea91906114c8565b60405180910390f35b6102066102013660046114f5565b61055f565b60405190151581526020016101ea565b6002545b6040519081526020016101ea565b61020661023636600461151d565b610578565b61021a7f6e71edae12b1b97f4d1f60370fef10105fa2faae0126114a169c64845d6126c981565b604051600681526020016101ea565b61021a61059d565b61028c6102873660046114f5565b6105ab565b005b6040805180820190915260018152601960f91b60208201526101dd565b61028c6102b9366004611567565b6105c1565b61021a6102cc3660046115b1565b6001600160a01b03165f9081526020819052604090205490565b61028c6105f6565b61021a6102fc3660046115b1565b610609565b61021a7fd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de881565b610330610626565b6040516101ea97969594939291906115ca565b61028c6103513660046116ff565b610668565b6008546040516001600160a01b0390911681526020016101ea565b6101dd6106d2565b61028c61038736600461177e565b6106e1565b61021a7f7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a226781565b6102066103c13660046114f5565b6106ee565b61028c6103d43660046117eb565b6106fb565b61028c6103e73660046116ff565b61070b565b61028c6103fa36600461183e565b61073b565b61021a7f158b0a9edf7a828aad02f63cd515c68ef2f50ba807396f6d12842833a159742981565b61021a6104343660046118a4565b6001600160a01b039182165f90815260016020908152604080832093909416825291909152205490565b61028c61046c3660046118d5565b61076b565b61020661047f3660046114f5565b6001600160a01b03919091165f908152600960209081526040808320938352929052205460ff1690565b61028c6104b73660046118d5565b6107c9565b61028c6104ca3660046115b1565b610830565b6060600380546104de90611950565b80601f016020809104026020016040519081016040528092919081815260200182805461050a90611950565b80156105555780601f1061052c57610100808354040283529160200191610555565b820191905f5260205f20905b81548152906001019060200180831161053857829003601f168201915b5050505050905090565b5f3361056c81858561086d565b60019150505b92915050565b5f3361058585828561087a565b6105908585856108f6565b60019150505b9392505050565b5f6105a6610953565b905090565b6105b3610a7c565b6105bd8282610aa9565b5050565b6105ef85858484876040516020016105db93929190611988565b604051602081830303815290604052610add565b5050505050565b6105fe610a7c565b6106075f610ba8565b565b6001600160a01b0381165f90815260076020526040812054610572565b5f6060805f5f5f6060610637610bf9565b61063f610c24565b604080515f80825260208201909252600f60f81b9b939a50919850469750309650945092509050565b6001600160a01b03861633146106995760405162461bcd60e51b8152600401610690906119ab565b60405180910390fd5b6106c97fd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de888888888888888610c4f565b50505050505050565b6060600480546104de90611950565b6105ef8585858585610ddb565b5f3361056c8185856108f6565b610706838383610add565b505050565b6106c97f7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a226788888888888888610c4f565b6106c98787878786868960405160200161075793929190611988565b604051602081830303815290604052610ddb565b6107be7f7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a22678a8a8a8a8a8a89898c6040516020016107aa93929190611988565b604051602081830303815290604052610c4f565b505050505050505050565b6001600160a01b03881633146107f15760405162461bcd60e51b8152600401610690906119ab565b6107be7fd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de88a8a8a8a8a8a89898c6040516020016107aa93929190611988565b610838610a7c565b6001600160a01b03811661086157604051631e4fbdf760e01b81525f6004820152602401610690565b61086a81610ba8565b50565b6107068383836001610f43565b6001600160a01b038381165f908152600160209081526040808320938616835292905220545f198110156108f057818110156108e257604051637dc7a0d960e11b81526001600160a01b03841660048201526024810182905260448101839052606401610690565b6108f084848484035f610f43565b50505050565b6001600160a01b03831661091f57604051634b637e8f60e11b81525f6004820152602401610690565b6001600160a01b0382166109485760405163ec442f0560e01b81525f6004820152602401610690565b610706838383611015565b5f306001600160a01b037f0000000000000000000000000000000000000000000000000000000000000000161480156109ab57507f000000000000000000000000000000000000000000000000000000000000000046145b156109d557507f000000000000000000000000000000000000000000000000000000000000000090565b6105a6604080517f8b73c3c69bb8fe3d512ecc4cf759cc79239f7b179b0ffacaa9a75d522b39400f60208201527f0000000000000000000000000000000000000000000000000000000000000000918101919091527f000000000000000000000000000000000000000000000000000000000000000060608201524660808201523060a08201525f9060c00160405160208183030381529060405280519060200120905090565b6008546001600160a01b031633146106075760405163118cdaa760e01b8152336004820152602401610690565b6001600160a01b038216610ad25760405163ec442f0560e01b81525f6004820152602401610690565b6105bd5f8383611015565b610ae7838361113b565b604080517f158b0a9edf7a828aad02f63cd515c68ef2f50ba807396f6d12842833a159742960208201526001600160a01b0385169181019190915260608101839052610b4e90849060800160405160208183030381529060405280519060200120836111c5565b6001600160a01b0383165f818152600960209081526040808320868452909152808220805460ff19166001179055518492917f1cdd46ff242716cdaa72d159d339a485b3438398348d68f09d7c8c0a59353d8191a3505050565b600880546001600160a01b038381166001600160a01b0319831681179093556040519116919082907f8be0079c531659141344cd1fd0a4f28419497f9722a3daafe3b4186f6b6457e0905f90a35050565b60606105a67f0000000000000000000000000000000000000000000000000000000000000000611224565b60606105a67f0000000000000000000000000000000000000000000000000000000000000000611224565b834211610cb25760405162461bcd60e51b815260206004820152602b60248201527f46696174546f6b656e56323a20617574686f72697a6174696f6e206973206e6f60448201526a1d081e595d081d985b1a5960aa1b6064820152608401610690565b824210610d0f5760405162461bcd60e51b815260206004820152602560248201527f46696174546f6b656e56323a20617574686f72697a6174696f6e2069732065786044820152641c1a5c995960da1b6064820152608401610690565b610d19878361113b565b6040805160208082018b90526001600160a01b038a811683850152891660608301526080820188905260a0820187905260c0820186905260e0808301869052835180840390910181526101009092019092528051910120610d7b8882846111c5565b6001600160a01b0388165f818152600960209081526040808320878452909152808220805460ff19166001179055518592917f98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a591a36107be8888886108f6565b5f19821480610dea5750428210155b610e365760405162461bcd60e51b815260206004820152601e60248201527f46696174546f6b656e56323a207065726d6974206973206578706972656400006044820152606401610690565b5f7f6e71edae12b1b97f4d1f60370fef10105fa2faae0126114a169c64845d6126c9868686610e818a6001600160a01b03165f90815260076020526040902080546001810190915590565b6040805160208101969096526001600160a01b0394851690860152929091166060840152608083015260a082015260c0810184905260e001604051602081830303815290604052805190602001209050610ee486610ede83611261565b8461128d565b610f305760405162461bcd60e51b815260206004820152601a60248201527f454950323631323a20696e76616c6964207369676e61747572650000000000006044820152606401610690565b610f3b86868661086d565b505050505050565b6001600160a01b038416610f6c5760405163e602df0560e01b81525f6004820152602401610690565b6001600160a01b038316610f9557604051634a1406b160e11b81525f6004820152602401610690565b6001600160a01b038085165f90815260016020908152604080832093871683529290522082905580156108f057826001600160a01b0316846001600160a01b03167f8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b9258460405161100791815260200190565b60405180910390a350505050565b6001600160a01b03831661103f578060025f82825461103491906119f0565b909155506110af9050565b6001600160a01b0383165f90815260208190526040902054818110156110915760405163391434e360e21b81526001600160a01b03851660048201526024810182905260448101839052606401610690565b6001600160a01b0384165f9081526020819052604090209082900390555b6001600160a01b0382166110cb576002805482900390556110e9565b6001600160a01b0382165f9081526020819052604090208054820190555b816001600160a01b0316836001600160a01b03167fddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef8360405161112e91815260200190565b60405180910390a3505050565b6001600160a01b0382165f90815260096020908152604080832084845290915290205460ff16156105bd5760405162461bcd60e51b815260206004820152602e60248201527f46696174546f6b656e56323a20617574686f72697a6174696f6e20697320757360448201526d1959081bdc8818d85b98d95b195960921b6064820152608401610690565b6111d8836111d284611261565b8361128d565b6107065760405162461bcd60e51b815260206004820152601e60248201527f46696174546f6b656e56323a20696e76616c6964207369676e617475726500006044820152606401610690565b60605f611230836112fd565b6040805160208082528183019092529192505f91906020820181803683375050509182525060208101929092525090565b5f61057261126d610953565b8360405161190160f01b8152600281019290925260228201526042902090565b5f836001600160a01b03163b5f036112eb575f5f6112ab8585611324565b5090925090505f8160038111156112c4576112c4611a0f565b1480156112e25750856001600160a01b0316826001600160a01b0316145b92505050610596565b6112f684848461136d565b9050610596565b5f60ff8216601f81111561057257604051632cd44ac360e21b815260040160405180910390fd5b5f5f5f835160410361135b576020840151604085015160608601515f1a61134d888285856113d2565b955095509550505050611366565b505081515f91506002905b9250925092565b805160408051630b135d3f60e11b8082526004820186905260248201929092525f92906020820185604483015e5f82606483010152601f820160051c60051b915060205f60648401838a5afa9050825f5114601f3d1116811693505050509392505050565b5f80807f7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a084111561140b57505f91506003905082611490565b604080515f808252602082018084528a905260ff891692820192909252606081018790526080810186905260019060a0016020604051602081039080840390855afa15801561145c573d5f5f3e3d5ffd5b5050604051601f1901519150506001600160a01b03811661148757505f925060019150829050611490565b92505f91508190505b9450945094915050565b5f81518084528060208401602086015e5f602082860101526020601f19601f83011685010191505092915050565b602081525f610596602083018461149a565b80356001600160a01b03811681146114f0575f5ffd5b919050565b5f5f60408385031215611506575f5ffd5b61150f836114da565b946020939093013593505050565b5f5f5f6060848603121561152f575f5ffd5b611538846114da565b9250611546602085016114da565b929592945050506040919091013590565b803560ff811681146114f0575f5ffd5b5f5f5f5f5f60a0868803121561157b575f5ffd5b611584866114da565b94506020860135935061159960408701611557565b94979396509394606081013594506080013592915050565b5f602082840312156115c1575f5ffd5b610596826114da565b60ff60f81b8816815260e060208201525f6115e860e083018961149a565b82810360408401526115fa818961149a565b606084018890526001600160a01b038716608085015260a0840186905283810360c0850152845180825260208087019350909101905f5b8181101561164f578351835260209384019390920191600101611631565b50909b9a5050505050505050505050565b634e487b7160e01b5f52604160045260245ffd5b5f82601f830112611683575f5ffd5b813567ffffffffffffffff81111561169d5761169d611660565b604051601f8201601f19908116603f0116810167ffffffffffffffff811182821017156116cc576116cc611660565b6040528181528382016020018510156116e3575f5ffd5b816020850160208301375f918101602001919091529392505050565b5f5f5f5f5f5f5f60e0888a031215611715575f5ffd5b61171e886114da565b965061172c602089016114da565b955060408801359450606088013593506080880135925060a0880135915060c088013567ffffffffffffffff811115611763575f5ffd5b61176f8a828b01611674565b91505092959891949750929550565b5f5f5f5f5f60a08688031215611792575f5ffd5b61179b866114da565b94506117a9602087016114da565b93506040860135925060608601359150608086013567ffffffffffffffff8111156117d2575f5ffd5b6117de88828901611674565b9150509295509295909350565b5f5f5f606084860312156117fd575f5ffd5b611806846114da565b925060208401359150604084013567ffffffffffffffff811115611828575f5ffd5b61183486828701611674565b9150509250925092565b5f5f5f5f5f5f5f60e0888a031215611854575f5ffd5b61185d886114da565b965061186b602089016114da565b9550604088013594506060880135935061188760808901611557565b9699959850939692959460a0840135945060c09093013592915050565b5f5f604083850312156118b5575f5ffd5b6118be836114da565b91506118cc602084016114da565b90509250929050565b5f5f5f5f5f5f5f5f5f6101208a8c0312156118ee575f5ffd5b6118f78a6114da565b985061190560208b016114da565b975060408a0135965060608a0135955060808a0135945060a08a0135935061192f60c08b01611557565b989b979a50959894979396929550929360e081013593506101000135919050565b600181811c9082168061196457607f821691505b60208210810361198257634e487b7160e01b5f52602260045260245ffd5b50919050565b928352602083019190915260f81b6001600160f81b031916604082015260410190565b60208082526025908201527f46696174546f6b656e56323a2063616c6c6572206d7573742062652074686520604082015264706179656560d81b606082015260800190565b8082018082111561057257634e487b7160e01b5f52601160045260245ffd5b634e487b7160e01b5f52602160045260245ffdfea2646970667358221220469b1019a21588aed8e1c234a1dd9c2eb4368b95690b20d4b6e527cbf409d51e64736f6c634300081c0033"
} as const;

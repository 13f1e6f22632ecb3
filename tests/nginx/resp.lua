-- A minimal Redis client over ngx.socket.tcp, for the tests only (Debian has
-- no lua-resty-redis): the calls cellrate.share makes (script, evalsha, eval,
-- hdel), answered as lua-resty-redis answers them (an error reply: false and
-- its text; a nil reply: ngx.null), with connect, set_timeout,
-- set_keepalive and close. new() makes no socket, so it also runs in init_by_lua.
local M = {}
local Client = {}
Client.__index = Client

function M.new()  -- also redis:new(), as lua-resty-redis
    return setmetatable({}, Client)
end

function Client:set_timeout(ms)
    self.timeout = ms
end

function Client:connect(host, port)
    self.sock = ngx.socket.tcp()
    if self.timeout then
        self.sock:settimeout(self.timeout)
    end
    return self.sock:connect(host, port)
end

function Client:set_keepalive(idle_ms, pool_size)
    local sock = self.sock
    self.sock = nil
    return sock:setkeepalive(idle_ms, pool_size)
end

function Client:close()
    local sock = self.sock
    self.sock = nil
    return sock and sock:close()
end

local function read_reply(sock)
    local line, err = sock:receive()
    if not line then
        return nil, err
    end
    local kind, rest = line:sub(1, 1), line:sub(2)
    if kind == "+" then
        return rest
    elseif kind == "-" then
        return false, rest
    elseif kind == ":" then
        return tonumber(rest)
    elseif kind == "$" then
        local size = tonumber(rest)
        if size < 0 then
            return ngx.null
        end
        local data
        data, err = sock:receive(size + 2)
        if not data then
            return nil, err
        end
        return data:sub(1, size)
    elseif kind == "*" then
        local items = {}
        for i = 1, tonumber(rest) do
            local item
            item, err = read_reply(sock)
            if item == nil then
                return nil, err
            end
            items[i] = item
        end
        return items
    end
    return nil, "unknown reply: " .. line
end

local function command(self, ...)
    if not self.sock then
        return nil, "not connected"
    end
    local words = { ... }
    local request = { "*" .. #words .. "\r\n" }
    for _, word in ipairs(words) do
        word = tostring(word)
        request[#request + 1] = "$" .. #word .. "\r\n" .. word .. "\r\n"
    end
    local sent, err = self.sock:send(request)
    if not sent then
        return nil, err
    end
    return read_reply(self.sock)
end

for _, name in ipairs({ "script", "evalsha", "eval", "hdel" }) do
    Client[name] = function(self, ...)
        return command(self, name, ...)
    end
end

return M
